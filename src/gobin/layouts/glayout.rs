//! Where `goid` and `stack.hi` are in `runtime.g` for each Go release, for binaries
//! without DWARF. Every entry was read from the DWARF of a real build of that release
//! (tests/binaries.rs checks them again for the releases it builds, tests/go-versions.sh
//! for all). A release newer than the table gets None: better no goid than a wrong one.

use crate::gobin::{go_minor, GLayout, Target};

/// `stack` is g's first field (`stack.lo` at 0, `stack.hi` at 8) in every release.
const STACK_HI: u32 = 8;

/// The layout for Go 1.`minor`; None for releases nobody measured.
pub(crate) fn by_version(minor: u32) -> Option<GLayout> {
    // Measured on go1.17.13, 1.18.10, 1.19.13, 1.20.14, 1.21.13, 1.22.12 (152),
    // 1.23.12, 1.24.13 (160: g gained fields before goid), 1.25.14, 1.26.8, 1.26.11 and
    // 1.27.4 (152 again).
    let goid = match minor {
        17..=22 => 152,
        23..=24 => 160,
        25..=27 => 152,
        _ => return None,
    };
    Some(GLayout { goid, stack_hi: STACK_HI })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_releases() {
        assert_eq!(by_version(17), Some(GLayout { goid: 152, stack_hi: 8 }));
        assert_eq!(by_version(23).map(|g| g.goid), Some(160));
        assert_eq!(by_version(16), None);
        assert_eq!(by_version(99), None);
    }
}

impl Target {
    /// Offsets of `goid` and `stack.hi` in runtime.g: from DWARF, or without it from a
    /// table by Go version (see `glayout`); None when neither knows.
    pub fn g_layout(&self) -> Option<GLayout> {
        *self
            .g_layout
            .get_or_init(|| self.g_layout_from_dwarf().or_else(|| by_version(go_minor(self.go_version.as_deref()?)?)))
    }

    /// The layout of runtime.g that gtrace assumes for binaries of Go `version`
    /// (`go1.21.13`) without DWARF.
    pub fn g_layout_for_version(version: &str) -> Option<GLayout> {
        by_version(go_minor(version)?)
    }

    /// Offsets of `goid` and `stack.hi` in runtime.g as DWARF gives them.
    pub fn g_layout_from_dwarf(&self) -> Option<GLayout> {
        {
            let mut state = self.dwarf.borrow_mut();
            let dwarf = Self::dwarf_mut(&mut state, self.dwarf_source().0, self.dwarf_source().1).ok()??;
            let members = dwarf.struct_members("runtime", "runtime.g").ok()??;
            let goid = members.iter().find(|m| m.name == "goid")?.offset;
            let stack = members.iter().find(|m| m.name == "stack")?;
            let hi = dwarf.members_at(stack.ty?).ok()?.into_iter().find(|m| m.name == "hi")?.offset;
            Some(GLayout { goid: u32::try_from(goid).ok()?, stack_hi: u32::try_from(stack.offset + hi).ok()? })
        }
    }
}
