//! Where the runtime keeps what a tracer needs to see panics end calls (docs/panics.md):
//! the stack pointer of the frame a recovery resumes, and the panic's value.
//!
//! Up to Go 1.21, gopanic unlinks a recovered panic and passes the recovering frame's SP
//! to runtime.recovery in `g.sigcode0`. From Go 1.22 (the runtime's rewritten panics),
//! runtime.recovery finds the recovered panic at `g._panic`, and the frame in its `sp`.
//! In every release `runtime._panic` holds the value in `arg`, which fatalpanic's
//! argument points at. The offsets come from DWARF, else from a table by Go version.

use crate::gobin::{go_minor, Target};

/// How runtime.recovery learns where the recovering frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Go 1.17 to 1.21: `g.sigcode0` holds its SP.
    Sigcode { sigcode0: u32 },
    /// Go 1.22 and later: `g._panic` points at the recovered panic, whose `sp` it is.
    PanicSp { g_panic: u32, sp: u32 },
}

/// The offsets of the runtime's panic state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicLayout {
    pub recovery: Recovery,
    /// `runtime._panic.arg`, the panic's value (an `any`).
    pub arg: u32,
}

/// The layout for Go 1.`minor` without DWARF; None for releases nobody measured.
fn by_version(minor: u32) -> Option<PanicLayout> {
    // Read from the DWARF of go1.17.13, 1.18.10, 1.19.13, 1.20.14, 1.21.13, 1.22.12,
    // 1.23.12, 1.24.13, 1.25.14, 1.26.8 and 1.27.4 builds (tests/panics.rs checks the
    // toolchains it builds against DWARF again, tests/binaries.rs with
    // tests/go-versions.sh every release). Go 1.21 moved g.sigcode0; Go 1.22 rewrote
    // panics; `_panic.argp` came first until Go 1.26 dropped it, moving `arg` to the
    // start and `sp` up by a word, and Go 1.27 added a word before `sp` again.
    let (recovery, arg) = match minor {
        17..=20 => (Recovery::Sigcode { sigcode0: 0x110 }, 8),
        21 => (Recovery::Sigcode { sigcode0: 0xf8 }, 8),
        22..=25 => (Recovery::PanicSp { g_panic: 0x20, sp: 0x30 }, 8),
        26 => (Recovery::PanicSp { g_panic: 0x20, sp: 0x28 }, 0),
        27 => (Recovery::PanicSp { g_panic: 0x20, sp: 0x30 }, 0),
        _ => return None,
    };
    Some(PanicLayout { recovery, arg })
}

impl Target {
    /// Where the runtime keeps the panic state that `on panic` and the unwinding of
    /// timed frames read.
    pub fn panic_layout(&self) -> Option<PanicLayout> {
        self.panic_layout_from_dwarf().or_else(|| by_version(go_minor(self.go_version()?)?))
    }

    /// The panic layout gtrace assumes for binaries of Go `version` (`go1.21.13`)
    /// without DWARF.
    pub fn panic_layout_for_version(version: &str) -> Option<PanicLayout> {
        by_version(go_minor(version)?)
    }

    /// The panic layout as DWARF gives it.
    pub fn panic_layout_from_dwarf(&self) -> Option<PanicLayout> {
        let mut state = self.dwarf.borrow_mut();
        let dwarf = Self::dwarf_mut(&mut state, self.dwarf_source().0, self.dwarf_source().1).ok()??;
        let g = dwarf.struct_members("runtime", "runtime.g").ok()??;
        let panic = dwarf.struct_members("runtime", "runtime._panic").ok()??;
        let at = |members: &[crate::gobin::dwarf::types::Member], name: &str| {
            members.iter().find(|m| m.name == name).and_then(|m| u32::try_from(m.offset).ok())
        };
        let arg = at(&panic, "arg")?;
        let minor = go_minor(self.go_version()?)?;
        let recovery = if minor >= 22 {
            Recovery::PanicSp { g_panic: at(&g, "_panic")?, sp: at(&panic, "sp")? }
        } else {
            Recovery::Sigcode { sigcode0: at(&g, "sigcode0")? }
        };
        Some(PanicLayout { recovery, arg })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_releases_only() {
        assert_eq!(by_version(17).map(|l| l.recovery), Some(Recovery::Sigcode { sigcode0: 0x110 }));
        assert!(matches!(by_version(27).map(|l| l.recovery), Some(Recovery::PanicSp { sp: 0x30, .. })));
        assert_eq!(by_version(21).map(|l| l.recovery), Some(Recovery::Sigcode { sigcode0: 0xf8 }));
        assert_eq!(by_version(16), None);
        assert_eq!(by_version(28), None);
    }
}
