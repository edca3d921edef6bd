//! gtrace: a Go-aware tracing language, compiled straight to eBPF.
//!
//! The pipeline, one folder a stage (see docs/ARCHITECTURE.md):
//! `syntax` (text → AST) → `target` (the Go binary: symbols, DWARF, ABI) →
//! `check` (names, probes and types, into side tables) → `lower` (AST → eBPF) →
//! `bpf` (instructions, encoding, disassembly) → `object` (the BPF ELF) →
//! `runtime` (aya: load, attach, read) → `output` (text or JSON); `export` serves the
//! maps as metrics while tracing (Prometheus, OTLP); `profile` draws the stack maps at
//! exit (pprof, flame graphs, folded stacks).
//! `compile` states the order of the passes (the compiler as a library); `trace` runs a
//! compiled script; `driver` is the command line's flow; `diag` renders every error.

pub use compile::{compile, Compiled, Options};

pub mod arch;
pub mod bpf;
pub mod cache;
pub mod capture;
pub mod check;
pub mod cli;
pub mod compile;
pub mod diag;
pub mod driver;
pub mod export;
pub mod gobin;
pub mod gotypes;
pub mod hist;
pub mod input;
pub mod library;
pub mod lower;
pub mod object;
pub mod output;
pub mod plan;
pub mod profile;
pub mod runtime;
pub mod syntax;
pub mod trace;
