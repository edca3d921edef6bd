//! The pipeline in one place: the order of the passes, from a script to a running trace.
pub fn main() -> i32 { 0 }
