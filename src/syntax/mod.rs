//! Source text to syntax tree: the pest grammar in grammar/gtrace.pest, and the
//! conversion of its parse tree into `ast`.

pub mod ast;
pub mod format;
pub mod parser;
pub mod visit;

pub use parser::parse;
