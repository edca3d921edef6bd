//! At exit, the pictures the command line asked for (`--pprof`, `--flamegraph`, `-f
//! folded`): every map keyed by `ustack` read once more, its stacks named through the
//! target (with a PIE's load bias), and drawn by crate::profile; a line on standard error
//! says what was written, and the folded stacks go to standard output.

use super::symbols::TargetSymbols;
use super::{written, Halt, Process};
use crate::cli::TraceArgs;
use crate::diag::Failure;
use crate::output;
use crate::plan::Plan;
use crate::profile::{self, pprof::Binary, stacks::StackMap};
use crate::runtime::Loaded;

/// Draws the pictures; `detached` marks the maps whose probes the budget cut as partial.
pub(super) fn write(
    loaded: &Loaded,
    plan: &Plan,
    detached: &[output::stats::Detached],
    symbols: &TargetSymbols,
    (process, args): (&Process, &TraceArgs),
) -> Result<(), Halt> {
    let pictures = args.pictures(&process.shown);
    if !pictures.wanted() {
        return Ok(());
    }
    let mut maps = Vec::new();
    for spec in &plan.maps {
        let Some(stack) = profile::stack_key(&spec.role) else { continue };
        let raw = loaded.map_entries(&spec.object_name)?;
        if let Some(mut dump) = output::decode_map(spec, &raw, plan) {
            // Interface keys become labels by their type's name.
            output::name_map(&mut dump, symbols);
            dump.partial = output::stats::partial(plan, &spec.object_name, detached);
            maps.push(StackMap { dump, stack });
        }
    }
    let done = pictures
        .write(&maps, symbols, &binary(symbols, process))
        .map_err(|e| Failure::system(&e, Some("check that the folder exists and can be written")))?;
    for note in &done.notes {
        eprintln!("{note}");
    }
    if pictures.folded {
        written(output::write_out(&mut std::io::stdout(), done.folded.as_bytes()))?;
    }
    Ok(())
}

/// The traced binary as a profile's mapping names it: by the path given for it, its
/// build id, and where its code is in the traced process.
fn binary(symbols: &TargetSymbols, process: &Process) -> Binary {
    let target = symbols.target();
    let ids = target.build_ids();
    let build_id = ids.gnu.clone().or_else(|| ids.go.clone()).unwrap_or_default();
    let bias = if symbols.is_pie() { symbols.bias() } else { Some(0) };
    let text = match (target.text_segment(), bias) {
        (Some((start, end, offset)), Some(b)) => Some((start.wrapping_add(b), end.wrapping_add(b), offset)),
        _ => None,
    };
    Binary { path: process.shown.display().to_string(), build_id, text }
}
