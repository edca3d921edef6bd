//! Why a Go value a probe names cannot be read where the probe is: one variant per
//! reason, with named fields, its message and a hint that says what to do instead. The
//! checker renders it where the script names the value (typeck::names).

use thiserror::Error;

/// A parameter, result or local the probe may name but not read at this site.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Unreadable {
    /// A result of a stack-ABI function (assembly; arm64 before Go 1.18) in a binary
    /// without DWARF: it sits after the arguments, whose size only DWARF knows.
    #[error("`{name}` cannot be located without DWARF: {function} passes its results on the stack after its arguments, whose size only DWARF knows")]
    StackResult { name: String, function: String },
    /// A parameter of a function inlined at the probe's site.
    #[error("`{name}` is a parameter of {function}, which was inlined here: {why}, so it cannot be read at this site")]
    Inlined { name: String, function: String, why: InlinedWhy },
    /// A local DWARF gives no type.
    #[error("`{name}` has no type in DWARF")]
    NoType { name: String },
    /// A local declared on the probed line: it holds nothing where the line starts.
    #[error("`{name}` is declared at {at}, and holds nothing yet where the line starts")]
    NothingYet { name: String, at: String },
    /// A local in scope that the compiler keeps nowhere at the site.
    #[error("`{name}` is optimized away at {at}: the compiler keeps it nowhere there")]
    OptimizedAway { name: String, at: String },
    /// A local whose DWARF location gtrace cannot read.
    #[error("`{name}` cannot be read at {at}: {why}")]
    Location { name: String, at: String, why: String },
    /// A local declared after the probed line.
    #[error("`{name}` is not declared yet at {at}: it is declared at {declared}")]
    NotDeclaredYet { name: String, at: String, declared: String },
    /// A local of a block that does not hold the probed line.
    #[error("`{name}` is not in scope at {at}: it is declared at {declared}, in a block that does not hold this line")]
    OutOfScope { name: String, at: String, declared: String },
}

/// Why an inlined call's parameter cannot be read at its site.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum InlinedWhy {
    /// DWARF places it in a way gtrace does not read.
    #[error("{why}")]
    Location { why: String },
    /// DWARF lists it but places it nowhere at the probe's address.
    #[error("DWARF has no location for it where the probe is (optimized away there)")]
    NowhereHere,
    /// The inlined call's DWARF does not list it.
    #[error("the inlined code does not keep it (optimized away)")]
    NotKept,
    /// DWARF does not describe the inlined call at all.
    #[error("DWARF does not describe this inlined call")]
    Undescribed,
}

impl Unreadable {
    /// What the user can do instead, if anything.
    pub fn hint(&self) -> Option<String> {
        match self {
            Unreadable::StackResult { .. } => Some(
                "give gtrace the binary's DWARF: the unstripped binary, or its debug file with --debug-file".into(),
            ),
            Unreadable::Inlined { function, .. } => Some(format!(
                "probe the caller's line instead, or build with -gcflags=all=-l so that {function} stays a call"
            )),
            Unreadable::NothingYet { .. } => Some("probe the next line, where it holds its value".into()),
            Unreadable::OptimizedAway { .. } => {
                Some("a build with -gcflags=all='-N -l' keeps every local, as debuggers need".into())
            }
            Unreadable::NotDeclaredYet { declared, .. } => Some(format!("probe a line after {declared}")),
            Unreadable::OutOfScope { .. } => Some("probe a line inside the block that declares it".into()),
            Unreadable::NoType { .. } | Unreadable::Location { .. } => None,
        }
    }
}
