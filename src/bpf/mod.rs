//! eBPF instructions: encoding, decoding, a builder with labels, and a disassembler.
