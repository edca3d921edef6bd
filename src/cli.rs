//! The command line (clap).
