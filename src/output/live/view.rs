//! What one redraw of the live view shows, as lines of text (pure: no terminal): a
//! title, the budget's state, each probe's hits and cost, each map sorted by value
//! (largest first) with its rate per second and, for a `hist()`, its count and
//! percentiles, and the last lines the script printed.

use super::rates::Rates;
use crate::output::numbers::{percent, thousands};
use crate::output::stats::Stats;
use crate::output::text::{agg_scalar, duration, shown};
use crate::output::value::{AggValue, Value};
use crate::output::MapDump;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use std::time::Duration;

/// Rows of a map shown at most; the rest are counted.
pub const MAX_ROWS: usize = 20;

/// Everything one redraw shows.
pub struct Snapshot<'a> {
    /// `gtrace SCRIPT on TARGET`.
    pub title: &'a str,
    pub elapsed: Duration,
    pub maps: &'a [MapDump],
    /// gtrace's own numbers, when they could be read.
    pub stats: Option<&'a Stats>,
    /// The last lines the script printed, oldest first, and how many it printed in all.
    pub printed: &'a [String],
    pub printed_total: u64,
    /// The last lines of a command started with -c (None without one).
    pub command: Option<&'a [String]>,
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// The lines of one redraw, `width` columns wide at most (long keys are cut).
pub fn lines(s: &Snapshot, rates: &mut Rates, width: u16) -> Vec<Line<'static>> {
    let mut out = vec![
        Line::from(vec![
            Span::styled("gtrace --live", bold()),
            Span::raw(format!("  {:.0}s  (q quits and prints the maps; arrows scroll)", s.elapsed.as_secs_f64())),
        ]),
        Line::raw(cut(s.title, width as usize)),
    ];
    match s.stats {
        Some(stats) => {
            out.extend(budget(stats, rates));
            out.push(Line::raw(""));
            out.extend(probes(stats, rates, width));
        }
        None => out.push(Line::raw("gtrace's own numbers (hits, costs) could not be read at this redraw")),
    }
    for dump in s.maps {
        out.push(Line::raw(""));
        out.extend(map(dump, rates, width));
    }
    if !s.printed.is_empty() {
        out.push(Line::raw(""));
        let head = format!("printed ({} lines; all of them print when the view closes)", thousands(s.printed_total));
        out.push(Line::styled(head, bold()));
        out.extend(s.printed.iter().map(|l| Line::raw(cut(l, width as usize))));
    }
    if let Some(lines) = s.command {
        out.push(Line::raw(""));
        out.push(Line::styled("the command's output (all of it prints when the view closes)", bold()));
        out.extend(lines.iter().map(|l| Line::raw(cut(l, width as usize))));
    }
    out
}

/// The budget's line, and a line per cut it made.
fn budget(stats: &Stats, rates: &mut Rates) -> Vec<Line<'static>> {
    let total: f64 = stats.probes.iter().filter(|p| p.in_target).map(|p| p.cost_ns).sum();
    let now = rates.per_second("cost", "", total).map(|ns| format!("{}% now, ", percent(ns / 1e7)));
    let since = if stats.elapsed_ns == 0 { 0.0 } else { 100.0 * total / stats.elapsed_ns as f64 };
    let cost = format!("probes cost {}{}% since the start", now.unwrap_or_default(), percent(since));
    let head = match stats.budget_percent {
        Some(p) => format!("--budget {}% of a CPU: {cost}", percent(p)),
        None => format!("no --budget: {cost}"),
    };
    let mut out = vec![Line::raw(head)];
    if let Some(t) = stats.target.filter(|_| stats.elapsed_ns > 0) {
        let share = 100.0 * t.cpu_ns as f64 / stats.elapsed_ns as f64;
        let before = t.before_percent.map(|b| format!(", {}% before attaching", percent(b))).unwrap_or_default();
        out.push(Line::raw(format!(
            "target: {}% of a CPU since the start{before} (its threads' own accounting)",
            percent(share)
        )));
    }
    let warn = Style::default().fg(Color::Yellow);
    for d in &stats.detached {
        out.push(Line::styled(format!("detached: {} (it cost {}% of a CPU)", d.said(), percent(d.percent)), warn));
    }
    out
}

/// A row per probe that runs in the target: hits, their rate, eBPF time a hit, and its
/// cost now and since the start, in percent of one CPU.
fn probes(stats: &Stats, rates: &mut Rates, width: u16) -> Vec<Line<'static>> {
    let mut rows = vec![row(&["probe", "hits", "hits/s", "eBPF/hit", "cost now", "since start", ""])];
    for p in stats.probes.iter().filter(|p| p.in_target) {
        let hits = rates.per_second("hits", &p.program, p.hits as f64);
        let cost = rates.per_second("cost", &p.program, p.cost_ns);
        let since = if stats.elapsed_ns == 0 { 0.0 } else { 100.0 * p.cost_ns / stats.elapsed_ns as f64 };
        rows.push(vec![
            p.probe.clone(),
            thousands(p.hits),
            hits.map(per_second).unwrap_or_else(|| "-".into()),
            p.ns_per_hit().map(|n| duration(n.round() as i64)).unwrap_or_else(|| "-".into()),
            cost.map(|ns| format!("{}%", percent(ns / 1e7))).unwrap_or_else(|| "-".into()),
            format!("{}%", percent(since)),
            if p.attached { String::new() } else { "detached".into() },
        ]);
    }
    table(rows, width)
        .into_iter()
        .enumerate()
        .map(|(i, l)| if i == 0 { Line::styled(l, bold()) } else { Line::raw(l) })
        .collect()
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// `12.5/s`, or `3/s` for whole numbers.
fn per_second(r: f64) -> String {
    if r.fract() == 0.0 || r >= 100.0 {
        format!("{}/s", thousands(r.round() as u64))
    } else {
        format!("{r:.1}/s")
    }
}

/// What of an entry grows: a count, a sum, the number of values of an average, stats or
/// histogram; None for extremes and stored values, which have no rate.
fn amount(v: &AggValue) -> Option<f64> {
    match v {
        AggValue::Count(c) => Some(*c as f64),
        AggValue::Sum(s) => Some(*s as f64),
        AggValue::Avg { count, .. } | AggValue::Stats { count, .. } => Some(*count as f64),
        AggValue::Buckets { counts, .. } => Some(counts.iter().sum::<u64>() as f64),
        AggValue::Min(_) | AggValue::Max(_) => None,
    }
}

/// A key as one line: a stack's functions, leaf first, joined by `<`.
fn key_text(v: &Value) -> String {
    match v {
        Value::Stack { pcs, frames } => {
            let names = pcs.iter().enumerate().map(|(i, pc)| match frames.get(i) {
                Some(f) => f.split("+0x").next().unwrap_or(f).to_string(),
                None => format!("{pc:#x}"),
            });
            names.collect::<Vec<_>>().join(" < ")
        }
        other => shown(other),
    }
}

/// A map: its name, then a row per entry, largest first, at most `MAX_ROWS`.
fn map(dump: &MapDump, rates: &mut Rates, width: u16) -> Vec<Line<'static>> {
    let mut head = vec![Span::styled(dump.name.clone(), bold())];
    if let Some(why) = &dump.partial {
        head.push(Span::styled(format!("  (partial: {why})"), Style::default().fg(Color::Yellow)));
    }
    let mut entries: Vec<_> = dump.entries.iter().collect();
    entries.sort_by(|a, b| b.value.sort_key().cmp(&a.value.sort_key()).then_with(|| a.keys_text().cmp(&b.keys_text())));
    let hist = entries.iter().any(|e| matches!(&e.value, AggValue::Buckets { fine: Some(_), .. }));
    let mut rows = vec![if hist {
        row(&["key", "count", "/s", "p50", "p90", "p99", "max"])
    } else {
        row(&["key", "value", "/s"])
    }];
    for e in &entries {
        let key = if e.keys.is_empty() {
            "-".to_string()
        } else {
            e.keys.iter().map(key_text).collect::<Vec<_>>().join(", ")
        };
        let rate = amount(&e.value).filter(|_| e.plain.is_none()).and_then(|a| rates.per_second(&dump.name, &key, a));
        let rate = match rate {
            Some(r) if dump.durations && matches!(e.value, AggValue::Sum(_)) => format!("{}/s", duration(r as i64)),
            Some(r) => per_second(r),
            None => "-".into(),
        };
        rows.push(entry_row(dump, e, key, rate));
    }
    let more = rows.len().saturating_sub(1 + MAX_ROWS);
    rows.truncate(1 + MAX_ROWS);
    let mut out = vec![Line::from(head)];
    for (i, l) in table(rows, width).into_iter().enumerate() {
        out.push(if i == 0 {
            Line::styled(format!("  {l}"), Style::default().add_modifier(Modifier::DIM))
        } else {
            Line::raw(format!("  {l}"))
        });
    }
    if more > 0 {
        out.push(Line::raw(format!("  ... and {} more", thousands(more as u64))));
    }
    out
}

/// The cells of one entry: key, value (or a histogram's count and percentiles), rate.
fn entry_row(dump: &MapDump, e: &crate::output::MapEntry, key: String, rate: String) -> Vec<String> {
    let num = |n: i64| if dump.durations { duration(n) } else { n.to_string() };
    match &e.value {
        AggValue::Buckets { counts, fine, .. } => {
            let count = counts.iter().sum::<u64>();
            let mut cells = vec![key, thousands(count), rate];
            let q = |t: u32| fine.as_ref().and_then(|f| f.percentile(t)).map(num).unwrap_or_else(|| "-".into());
            cells.extend([
                q(500),
                q(900),
                q(990),
                fine.as_ref().and_then(|f| f.max).map(num).unwrap_or_else(|| "-".into()),
            ]);
            cells
        }
        v => {
            let value = e.plain.as_ref().map(shown).unwrap_or_else(|| agg_scalar(v, dump.durations));
            vec![key, value, rate]
        }
    }
}

/// Columns padded to one width each: the first left-aligned and cut to half the screen
/// when wider, the others right-aligned.
fn table(mut rows: Vec<Vec<String>>, width: u16) -> Vec<String> {
    let first = (width as usize / 2).max(20);
    for r in &mut rows {
        if let Some(c) = r.first_mut() {
            *c = cut(c, first);
        }
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells = r.iter().enumerate().map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[0])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            });
            cells.collect::<Vec<_>>().join("  ").trim_end().to_string()
        })
        .collect()
}

/// `text` cut to `max` characters, the cut marked with `…`.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::MapEntry;
    use std::time::Instant;

    fn entry(key: &str, value: AggValue) -> MapEntry {
        MapEntry { keys: vec![Value::Str(key.as_bytes().to_vec())], value, plain: None }
    }

    fn text(lines: &[Line]) -> Vec<String> {
        lines.iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect()).collect()
    }

    #[test]
    fn a_map_is_sorted_largest_first_with_its_rate() {
        let dump = MapDump {
            name: "@by".into(),
            agg: Some(crate::plan::Agg::Count),
            durations: false,
            key_names: vec!["k".into()],
            entries: vec![entry("small", AggValue::Count(3)), entry("big", AggValue::Count(40))],
            partial: None,
        };
        let t0 = Instant::now();
        let mut rates = Rates::new(t0);
        rates.tick(t0 + Duration::from_secs(2));
        let maps = [dump];
        let s = Snapshot {
            title: "t",
            elapsed: Duration::from_secs(2),
            maps: &maps,
            stats: None,
            printed: &[],
            printed_total: 0,
            command: None,
        };
        let out = text(&lines(&s, &mut rates, 100));
        let at =
            |k: &str| out.iter().position(|l| l.trim_start().starts_with(k)).unwrap_or_else(|| panic!("{k}: {out:?}"));
        assert!(at("big") < at("small"), "{out:?}");
        assert_eq!(out[at("big")].split_whitespace().collect::<Vec<_>>(), ["big", "40", "20/s"]);
        assert_eq!(out[at("small")].split_whitespace().collect::<Vec<_>>(), ["small", "3", "1.5/s"]);
    }

    #[test]
    fn a_histogram_shows_its_count_and_percentiles() {
        let mut counts = vec![0u64; crate::hist::BUCKETS];
        counts[crate::hist::index(1000)] = 99;
        counts[crate::hist::index(5000)] = 1;
        let fine = crate::hist::Fine { counts, min: Some(1000), max: Some(5000) };
        let dump = MapDump {
            name: "@lat".into(),
            agg: Some(crate::plan::Agg::Hist),
            durations: true,
            key_names: vec![],
            entries: vec![MapEntry {
                keys: vec![],
                value: AggValue::Buckets { counts: fine.rows(), sum: 0, fine: Some(Box::new(fine)) },
                plain: None,
            }],
            partial: Some("on entry main.f detached by --budget after 0.2s".into()),
        };
        let mut rates = Rates::new(Instant::now());
        let maps = [dump];
        let s = Snapshot {
            title: "t",
            elapsed: Duration::ZERO,
            maps: &maps,
            stats: None,
            printed: &[],
            printed_total: 0,
            command: None,
        };
        let out = text(&lines(&s, &mut rates, 100));
        assert!(out.iter().any(|l| l == "@lat  (partial: on entry main.f detached by --budget after 0.2s)"), "{out:?}");
        let header = out.iter().find(|l| l.contains("p50")).expect("a header");
        assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["key", "count", "/s", "p50", "p90", "p99", "max"]);
        let row = out.iter().find(|l| l.trim_start().starts_with('-')).expect("the row");
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["-", "100", "-", "1us", "1us", "1us", "5us"]);
    }

    #[test]
    fn the_last_lines_of_a_command_and_of_the_script_are_at_the_bottom() {
        let mut rates = Rates::new(Instant::now());
        let (printed, command) = (["slow: 12ms".to_string()], ["ready".to_string(), "serving".to_string()]);
        let s = Snapshot {
            title: "t",
            elapsed: Duration::ZERO,
            maps: &[],
            stats: None,
            printed: &printed,
            printed_total: 7,
            command: Some(&command),
        };
        let out = text(&lines(&s, &mut rates, 100));
        let at = out.iter().position(|l| l.starts_with("printed (7 lines")).unwrap_or_else(|| panic!("{out:?}"));
        let want =
            ["slow: 12ms", "", "the command's output (all of it prints when the view closes)", "ready", "serving"];
        assert_eq!(out[at + 1..], want, "{out:?}");
    }

    #[test]
    fn a_stack_key_is_one_line_of_functions() {
        let v = Value::Stack { pcs: vec![1, 2], frames: vec!["main.leaf+0x12".into(), "main.main+0x4".into()] };
        assert_eq!(key_text(&v), "main.leaf < main.main");
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
