//! Lowering: the checked script to eBPF programs and the `Plan` the runtime follows.
