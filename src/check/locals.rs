//! The Go values a line probe can name: the locals and parameters of the function (or
//! inlined copy) the line is in, where DWARF places them at the site's address, and for
//! those that cannot be read there, why, naming the line: optimized away there, not
//! declared yet, or declared in a block that does not hold the line.

use super::govalues::{go_ty, GoValue};
use crate::arch::abi::Location;
use crate::target::{LineSite, LocalState, Target, ValueLocation};

/// The locals at `site`, each readable with its place, or with why not.
pub fn line_values(target: &Target, site: &LineSite, limit: u32) -> Result<Vec<GoValue>, String> {
    let locals = target.locals_at(site).map_err(|e| e.to_string())?;
    let file = site.file.rsplit('/').next().unwrap_or(&site.file);
    let at = format!("{file}:{}", site.line);
    let word = target.word_type();
    let types = &*target.types();
    Ok(locals
        .into_iter()
        .map(|l| {
            let declared = l.decl_line.map(|d| format!("{file}:{d}")).unwrap_or_else(|| "another line".to_string());
            let (ty, location) = match (&l.state, l.ty) {
                (_, None) => (Err(format!("`{}` has no type in DWARF", l.name)), Location::Empty),
                (LocalState::InScope(ValueLocation::At(loc)), Some(t)) => (go_ty(types, t, &l.name, limit), loc.clone()),
                (LocalState::InScope(ValueLocation::Nowhere), _) if l.decl_line == Some(site.line) && !l.param => (
                    Err(format!("`{}` is declared at {at}, and holds nothing yet where the line starts", l.name)),
                    Location::Empty,
                ),
                (LocalState::InScope(ValueLocation::Nowhere), _) => {
                    (Err(format!("`{}` is optimized away at {at}: the compiler keeps it nowhere there", l.name)), Location::Empty)
                }
                (LocalState::InScope(ValueLocation::Unsupported(why)), _) => {
                    (Err(format!("`{}` cannot be read at {at}: {why}", l.name)), Location::Empty)
                }
                (LocalState::NotYet, _) => {
                    (Err(format!("`{}` is not declared yet at {at}: it is declared at {declared}", l.name)), Location::Empty)
                }
                (LocalState::OutOfScope, _) => (
                    Err(format!(
                        "`{}` is not in scope at {at}: it is declared at {declared}, in a block that does not hold this line",
                        l.name
                    )),
                    Location::Empty,
                ),
            };
            GoValue { name: l.name, type_id: l.ty.unwrap_or(word), ty, location, is_result: false, at_entry: false }
        })
        .collect())
}
