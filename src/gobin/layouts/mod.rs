//! The Go runtime's own structures, which change between releases: where `runtime.g`
//! keeps the goroutine id and stack bound (`glayout`), what a panic leaves for a tracer
//! (`panicinfo`), a map's headers (`maplayout`) and the keys its hash uses (`hashkeys`),
//! runtime type descriptors' names (`rtype`), generic dictionaries (`generics`), and
//! where the OpenTelemetry SDK keeps a context's span (`otel`).
//! Each from DWARF when the binary has it, else from a table by Go version, measured.

mod generics;
mod glayout;
mod hashkeys;
mod maplayout;
mod otel;
mod panicinfo;
pub(crate) mod rtype;

pub use generics::{any_type_args, dictionaries_by_generic, generic_name, instantiation, ArgumentKinds, Dictionary};
pub use hashkeys::AesGlobals;
pub use maplayout::MapLayout;
pub use otel::OtelContext;
pub use panicinfo::{PanicLayout, Recovery};
