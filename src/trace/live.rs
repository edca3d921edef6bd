//! The trace's side of `--live` (the view itself is crate::output::live): refusing it
//! off a terminal, and at each turn of the trace loop reading the keys and, once a
//! second, the maps and gtrace's own numbers for a redraw.

use super::{budget, stats, Halt};
use crate::diag::Failure;
use crate::output::live::{Asked, Live, TerminalError};
use crate::output::MapDump;
use crate::plan::Plan;
use crate::runtime::Loaded;

/// `--live` is refused before anything loads when standard output is not a terminal.
pub fn check() -> Result<(), Failure> {
    Live::check().map_err(failure)
}

/// A terminal error as the one way gtrace reports failures.
pub fn failure(e: TerminalError) -> Failure {
    match e {
        TerminalError::NotATerminal => Failure::message(
            e.to_string(),
            Some(
                "run it in a terminal, or leave out --live to print the maps at exit (`-f json` for a program to read)",
            ),
        ),
        TerminalError::Io { .. } => Failure::system(&e, None),
    }
}

/// Reads the keys, and redraws when a second has passed: true when the view was asked
/// to close.
pub fn turn(
    view: &mut Live,
    loaded: &Loaded,
    plan: &Plan,
    symbols: &super::symbols::TargetSymbols,
    costs: &budget::Costs,
) -> Result<bool, Halt> {
    if view.keys().map_err(failure)? == Asked::Quit {
        return Ok(true);
    }
    if view.due() {
        let maps = read_maps(loaded, plan, &costs.meter.detached, symbols)?;
        let stats = costs.meter.collect(loaded, plan).ok();
        view.draw(&maps, stats.as_ref()).map_err(failure)?;
    }
    Ok(false)
}

/// Every user map as it is now, empty ones too (not the private `@_name` ones).
fn read_maps(
    loaded: &Loaded,
    plan: &Plan,
    detached: &[stats::Detached],
    symbols: &super::symbols::TargetSymbols,
) -> Result<Vec<MapDump>, Halt> {
    let mut maps = Vec::new();
    // Not the private `@_name` maps, as at exit.
    for spec in plan.maps.iter().filter(|s| s.role.is_shown_user()) {
        maps.extend(super::read_map(loaded, plan, spec, detached, symbols)?);
    }
    Ok(maps)
}
