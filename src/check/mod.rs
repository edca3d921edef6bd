//! Semantic checks: resolve probes to functions, names to parameters and builtins, and
//! type every expression; facts go into side tables, errors into `Diagnostics`.
