//! The BPF ELF object: programs in `uprobe/NAME` sections, legacy `maps`, relocations.
