//! The server's own CPU, sampled: every `EVERY` the time, the server's CPU time so far
//! (its cpuacct cgroup's `cpuacct.usage`, ns, all its threads in one read; else the sum
//! of its threads' schedstat) and whether a probe is on one of its instructions (the
//! byte at that address in /proc/PID/mem is an int3 while a uprobe is there). Windows of
//! the samples give its CPU a second over a stretch of time, and the probe's byte gives
//! the duty cycle's attached and detached intervals as the server's memory saw them.
//! Also the mean and its 95% interval (Student's t) that the dutycpu bench reports.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a sample is taken.
pub const EVERY: Duration = Duration::from_millis(5);

#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Instant,
    /// The same moment by the wall clock (ns since the epoch), as the loader tells time.
    pub wall_ns: u64,
    pub cpu_ns: f64,
    /// The probe byte read 0xCC (`None`: no byte watched).
    pub attached: Option<bool>,
}

/// Where the server's CPU time is read.
enum Meter {
    /// A cpuacct cgroup of its own: its directory (removed at the end).
    Cgroup(std::path::PathBuf),
    Schedstat(u32),
}

impl Meter {
    /// A cgroup v1 cpuacct group holding `pid` (all its threads), else its threads' schedstat.
    fn of(pid: u32) -> (Meter, String) {
        let dir = std::path::PathBuf::from(format!("/sys/fs/cgroup/cpuacct/gtrace-bench-{pid}"));
        let made = std::fs::create_dir(&dir).and_then(|()| std::fs::write(dir.join("cgroup.procs"), pid.to_string()));
        match made {
            Ok(()) => (Meter::Cgroup(dir), "cpuacct.usage of a cgroup of its own".into()),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                (Meter::Schedstat(pid), format!("its threads' schedstat (no cpuacct cgroup: {e})"))
            }
        }
    }

    fn read(&self) -> Option<f64> {
        match self {
            Meter::Cgroup(dir) => std::fs::read_to_string(dir.join("cpuacct.usage")).ok()?.trim().parse().ok(),
            Meter::Schedstat(pid) => super::server::cpu_ns(*pid).ok(),
        }
    }

    /// Gives the server back to the root cgroup and removes its own.
    fn remove(&self, pid: u32) {
        if let Meter::Cgroup(dir) = self {
            let _ = std::fs::write("/sys/fs/cgroup/cpuacct/cgroup.procs", pid.to_string());
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A sampling thread and what it took.
pub struct Sampler {
    pub samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pid: u32,
    meter: Arc<Meter>,
    pub how: String,
}

impl Sampler {
    /// Samples process `pid`, watching the byte at `address` (a virtual address) if given.
    pub fn start(pid: u32, address: Option<u64>) -> Result<Sampler, String> {
        let (meter, how) = Meter::of(pid);
        let meter = Arc::new(meter);
        meter.read().ok_or("the server's CPU time cannot be read")?;
        let mem = match address {
            Some(a) => Some((File::open(format!("/proc/{pid}/mem")).map_err(|e| format!("/proc/{pid}/mem: {e}"))?, a)),
            None => None,
        };
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st, m) = (samples.clone(), stop.clone(), meter.clone());
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            while !st.load(Ordering::Relaxed) {
                let attached = mem.as_ref().map(|(f, a)| {
                    let mut b = [0u8];
                    f.read_at(&mut b, *a).is_ok() && b[0] == 0xCC
                });
                if let Some(cpu_ns) = m.read() {
                    s.lock().unwrap().push(Sample { at: Instant::now(), wall_ns: wall_ns(), cpu_ns, attached });
                }
                next += EVERY;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        });
        Ok(Sampler { samples, stop, thread: Some(thread), pid, meter, how })
    }

    /// The server's CPU ns a request between `from` and `to` (`answered`: how many
    /// requests were answered between two wall-clock times), and its requests a second.
    pub fn per_request(&self, from: Instant, to: Instant, answered: &dyn Fn(u64, u64) -> f64) -> Option<(f64, f64)> {
        let s = self.samples.lock().unwrap();
        let a = s.iter().find(|x| x.at >= from)?;
        let b = s.iter().rev().find(|x| x.at <= to)?;
        let secs = b.at.checked_duration_since(a.at)?.as_secs_f64();
        let n = answered(a.wall_ns, b.wall_ns);
        (secs > 0.0 && n > 0.0).then(|| ((b.cpu_ns - a.cpu_ns) / n, n / secs))
    }

    /// The samples between `from` and `to`.
    pub fn between(&self, from: Instant, to: Instant) -> Vec<Sample> {
        self.samples.lock().unwrap().iter().filter(|x| x.at >= from && x.at <= to).copied().collect()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.meter.remove(self.pid);
    }
}

/// One duty-cycle period seen in the samples: the server's CPU ns a request while the
/// probe was there and while it was not, and the attached fraction of the period.
#[derive(Clone, Copy, Debug)]
pub struct Period {
    pub on: f64,
    pub off: f64,
    pub fraction: f64,
    /// Requests answered a second over the period.
    pub rate: f64,
}

impl Period {
    /// What the probes cost over the whole period, percent of a CPU: the extra a
    /// request while attached, at the period's rate, for the attached fraction.
    pub fn extra(&self) -> f64 {
        (self.on - self.off) * self.rate / 1e7 * self.fraction
    }
}

/// The duty cycle's periods in `samples`: each attached run and the detached run after it,
/// the samples next to a change of state left out (the change fell between two samples,
/// and the links go or come over some milliseconds).
pub fn periods(samples: &[Sample], answered: &dyn Fn(u64, u64) -> f64) -> Vec<Period> {
    // Runs of one state: (attached, first index, last index).
    let mut runs: Vec<(bool, usize, usize)> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let Some(on) = s.attached else { return Vec::new() };
        match runs.last_mut() {
            Some((state, _, last)) if *state == on => *last = i,
            _ => runs.push((on, i, i)),
        }
    }
    let per_request = |first: usize, last: usize| -> Option<f64> {
        // Two samples in from each change.
        let (a, b) = (first + 2, last.checked_sub(2)?);
        let n = answered(samples[a].wall_ns, samples[b].wall_ns);
        (b > a + 4 && n > 0.0).then(|| (samples[b].cpu_ns - samples[a].cpu_ns) / n)
    };
    let mut out = Vec::new();
    // Whole periods only: an attached run with a run before it and one after.
    for w in runs.windows(3) {
        let (before, on, off) = (w[0], w[1], w[2]);
        if before.0 || !on.0 || off.0 || off.2 + 1 >= samples.len() {
            continue;
        }
        let on_len = samples[off.1].at.duration_since(samples[on.1].at).as_secs_f64();
        let off_len = samples[off.2 + 1].at.duration_since(samples[off.1].at).as_secs_f64();
        if let (Some(on_ns), Some(off_ns)) = (per_request(on.1, on.2), per_request(off.1, off.2)) {
            let n = answered(samples[on.1].wall_ns, samples[off.2 + 1].wall_ns);
            let fraction = on_len / (on_len + off_len);
            out.push(Period { on: on_ns, off: off_ns, fraction, rate: n / (on_len + off_len) });
        }
    }
    out
}

/// Now by the wall clock, ns since the epoch.
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The mean of `v` and the half-width of its 95% interval (Student's t).
pub fn mean_ci(v: &[f64]) -> Option<(f64, f64)> {
    let n = v.len();
    if n < 2 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, t95(n - 1) * (var / n as f64).sqrt()))
}

/// Student's t, two-sided 95%, for `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
        2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        31..=60 => 2.00,
        61..=120 => 1.98,
        _ => 1.96,
    }
}

/// The first field of /proc/loadavg.
pub fn load_average() -> f64 {
    let mut text = String::new();
    let _ = File::open("/proc/loadavg").and_then(|mut f| f.read_to_string(&mut text));
    text.split_whitespace().next().and_then(|f| f.parse().ok()).unwrap_or(0.0)
}
