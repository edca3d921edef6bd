//! The budget's circuit breaker, measured: `benchtarget phases S` calls the hot function
//! for S seconds and reports its time per call over every 10 ms window. Untraced, then
//! traced by `on entry main.hot { }` under `--budget 1%` (with a second probe on a cold
//! function, main.main, so that the trace goes on once the hot probe is detached): how
//! long the breaker takes to act (the first window whose time per call is back within
//! twice the untraced median, from the start of the target's loop, which runs with the
//! probes already attached), and the time per call after it acted, against untraced.
//! It also checks the estimate the budget acts on: what gtrace's `--stats` says a hit of
//! the hot probe cost (the calibrated trap plus the eBPF run time), against what it
//! cost the target, as the target's own CPU time (getrusage: user and system) per call
//! before the breaker acted, less its CPU time per call untraced.

use std::path::Path;
use std::process::{Command, Stdio};

pub struct Governor {
    pub rounds: usize,
    /// Median ns per call, untraced.
    pub untraced_ns: Option<f64>,
    /// Median ns per call of the windows before the breaker acted.
    pub before_ns: Option<f64>,
    /// Median ns per call of the windows after it acted.
    pub after_ns: Option<f64>,
    /// From the start of the loop to the first window back within 2x untraced, ms.
    pub act_ms: Option<f64>,
    /// What --stats estimated a hit of the hot probe to cost, ns.
    pub estimated_ns: Option<f64>,
    /// What a traced call cost the target in CPU time beyond an untraced one, ns.
    pub measured_ns: Option<f64>,
    /// What gtrace said when it detached (one round's).
    pub said: Option<String>,
    pub note: Option<String>,
}

/// One window the target printed.
#[derive(Clone, Copy)]
struct Window {
    at_ms: f64,
    ns: f64,
    calls: f64,
    cpu_ns: f64,
}

fn windows(stdout: &str) -> Vec<Window> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<f64> = l.strip_prefix("window ")?.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            (w.len() == 4).then(|| Window { at_ms: w[0], ns: w[1], calls: w[2], cpu_ns: w[3] })
        })
        .collect()
}

/// CPU time per call over `windows`.
fn cpu_per_call(windows: &[Window]) -> Option<f64> {
    let calls: f64 = windows.iter().map(|w| w.calls).sum();
    (calls > 0.0).then(|| windows.iter().map(|w| w.cpu_ns).sum::<f64>() / calls)
}

/// What gtrace's --stats JSON says a hit of `probe` cost, ns.
fn estimated(stdout: &str, probe: &str) -> Option<f64> {
    let stats: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "stats")?;
    let p = stats["probes"].as_array()?.iter().find(|p| p["probe"] == probe)?;
    let hits = p["hits"].as_f64()?;
    (hits > 0.0).then(|| p["cost_ns"].as_f64().unwrap_or(0.0) / hits)
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn run(argv: &[String]) -> Result<(String, String), String> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

pub fn measure(gtrace: &str, target: &Path, quick: bool) -> Governor {
    let rounds = if quick { 2 } else { 5 };
    let seconds = if quick { "1" } else { "2" };
    let bin = target.display().to_string();
    let untraced_argv = vec![bin.clone(), "phases".into(), seconds.into()];
    let script = "on entry main.hot { } on entry main.main { }";
    let traced_argv: Vec<String> = vec![
        gtrace.into(),
        "-e".into(),
        script.into(),
        "--budget".into(),
        "1%".into(),
        "--stats".into(),
        "-f".into(),
        "json".into(),
        "-c".into(),
        format!("{bin} phases {seconds}"),
    ];
    let mut result = Governor {
        rounds: 0,
        untraced_ns: None,
        before_ns: None,
        after_ns: None,
        act_ms: None,
        estimated_ns: None,
        measured_ns: None,
        said: None,
        note: None,
    };
    let (mut untraced, mut before, mut after, mut act) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut estimates, mut measures) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (Ok((plain, _)), Ok((traced, said))) = (run(&untraced_argv), run(&traced_argv)) else {
            result.note = Some("a run failed to start".into());
            continue;
        };
        let plain = windows(&plain);
        let Some(base) = median(&mut plain.iter().map(|w| w.ns).collect::<Vec<_>>()) else {
            result.note = Some("the untraced run printed no windows".into());
            continue;
        };
        let w = windows(&traced);
        let Some(tripped) = w.iter().position(|x| x.ns <= 2.0 * base) else {
            result.note = Some(format!("the breaker never brought the target back within 2x: {}", said.trim()));
            continue;
        };
        untraced.push(base);
        act.push(w[tripped].at_ms);
        before.extend(w[..tripped].iter().map(|x| x.ns));
        if let Some(m) = median(&mut w[tripped..].iter().map(|x| x.ns).collect::<Vec<_>>()) {
            after.push(m);
        }
        if let (Some(t), Some(u)) = (cpu_per_call(&w[..tripped]), cpu_per_call(&plain)) {
            measures.push(t - u);
        }
        estimates.extend(estimated(&traced, "on entry main.hot"));
        result.said = said.lines().find(|l| l.starts_with("--budget")).map(str::to_string);
        result.rounds += 1;
    }
    result.untraced_ns = median(&mut untraced);
    result.before_ns = median(&mut before);
    result.after_ns = median(&mut after);
    result.act_ms = median(&mut act);
    result.estimated_ns = median(&mut estimates);
    result.measured_ns = median(&mut measures);
    result
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

impl Governor {
    /// The section of the report.
    pub fn render(&self) -> String {
        let mut s = String::from("\n### The budget's breaker: `on entry main.hot { }` under `--budget 1%`\n\n");
        s.push_str("`benchtarget phases` times main.hot over 10 ms windows; medians over rounds. ");
        s.push_str("acted: from the start of the target's loop (probes attached) to its first window back within 2x of untraced.\n\n");
        s.push_str("| rounds | untraced ns/call | traced, before ns/call | after ns/call | after / untraced | acted ms | note |\n");
        s.push_str("|---:|---:|---:|---:|---:|---:|---|\n");
        let ratio = self.after_ns.zip(self.untraced_ns).map(|(a, u)| a / u);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            self.rounds,
            opt(self.untraced_ns, 2),
            opt(self.before_ns, 0),
            opt(self.after_ns, 2),
            opt(ratio, 2),
            opt(self.act_ms, 0),
            self.note.as_deref().unwrap_or("")
        ));
        let accuracy = self.estimated_ns.zip(self.measured_ns).map(|(e, m)| e / m);
        s.push_str(&format!(
            "\nThe estimate the budget acts on: a hit of the hot probe cost {} ns by --stats (calibrated trap + eBPF run time), {} ns of the target's own CPU time (getrusage, traced windows before the breaker acted, less untraced): estimate / measured = {}.\n",
            opt(self.estimated_ns, 0),
            opt(self.measured_ns, 0),
            opt(accuracy, 2)
        ));
        if let Some(said) = &self.said {
            s.push_str(&format!("\ngtrace said (last round): `{said}`\n"));
        }
        s
    }

    /// The goal lines.
    pub fn goals(&self) -> Vec<String> {
        let ratio = self.after_ns.zip(self.untraced_ns).map(|(a, u)| a / u);
        let met = match ratio {
            Some(r) if r <= 2.0 => "**met**",
            Some(_) => "**not met**",
            None => "not measured",
        };
        vec![
            format!("- under --budget 1%, the target's time per call after the breaker trips within 2x of untraced: {met} ({}x)", opt(ratio, 2)),
            format!("- time for the breaker to act (from the start of the hot loop): {} ms", opt(self.act_ms, 0)),
        ]
    }
}
