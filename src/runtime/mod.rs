//! The only module that touches aya, syscalls and unsafe code: load the object, attach
//! uprobes, read maps and events, start and watch the target process.
