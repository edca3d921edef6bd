//! Where `goid` and `stack.hi` are in `runtime.g` for each Go release, for binaries
//! without DWARF. Every entry was read from the DWARF of a real build of that release
//! (tests/binaries.rs checks them again for the releases it builds, tests/go-versions.sh
//! for all). A release newer than the table gets None: better no goid than a wrong one.

use crate::gobin::GLayout;

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
