//! Export while tracing: every user map as metrics, served to Prometheus
//! (`--prometheus ADDR`) and pushed with the printed lines to an OpenTelemetry collector
//! (`--otlp URL`), read from the kernel's maps at each scrape or push.
//!
//! `Export::prepare` (before anything attaches: names checked, address bound, URL
//! parsed) → `start` (after attaching: the server's and the pusher's threads) → the
//! trace loop's sink, wrapped by `sink`, counts and queues printed lines → `finish` (a
//! last push, threads ended). `names` decides each map's metrics, `source` reads them,
//! `convert` turns maps into the neutral `model`, `promtext`, `promproto` (what a scraper
//! that asks for protobuf gets: native histograms) and `otlp` encode it.

mod convert;
mod model;
mod names;
mod openmetrics;
mod otlp;
mod promproto;
mod promtext;
mod selfmetrics;
mod server;
mod source;
mod traces;

pub use selfmetrics::{SelfCounter, SelfMetrics};

use crate::diag::Failure;
use crate::output::stats::Stats;
use crate::output::{self, Event, MapDump, OutputError, Sink};
use crate::plan::Plan;
use crate::runtime::Loaded;
use source::{Counters, Source};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the trace loop publishes its statistics to the exporters.
const STATS_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("`{addr}` is not an address to serve metrics on: {reason}")]
    Address { addr: String, reason: String },
    #[error("cannot serve metrics on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("`{url}` is not an OTLP/HTTP endpoint: {reason}")]
    Url { url: String, reason: &'static str },
    #[error("map {map} cannot be exported: `{name}` is not a metric name (ASCII letters, digits and `_`)")]
    MetricName { map: String, name: String },
    #[error("{first} and {second} would both export `{name}`")]
    Collision { first: String, second: String, name: String },
    #[error("--otlp-interval {given:?} is too short: pushes need at least 100ms between them")]
    Interval { given: Duration },
    #[error("cannot start the exporter: {source}")]
    Start { source: std::io::Error },
}

impl ExportError {
    pub fn hint(&self) -> Option<&'static str> {
        Some(match self {
            ExportError::Address { .. } => {
                "give HOST:PORT, [IPV6]:PORT, or :PORT for 127.0.0.1 (e.g. --prometheus :9464)"
            }
            ExportError::Bind { .. } => "pick a free port, or stop what listens there",
            ExportError::Url { .. } => "give the collector's OTLP/HTTP base, e.g. --otlp http://127.0.0.1:4318",
            ExportError::MetricName { .. } | ExportError::Collision { .. } => "rename one of the maps",
            ExportError::Interval { .. } => "the default is 10s; Prometheus scrapes every 15s to 1m",
            ExportError::Start { .. } => return None,
        })
    }
}

impl From<ExportError> for Failure {
    fn from(e: ExportError) -> Failure {
        Failure::system(&e, e.hint())
    }
}

/// What the command line asks to export.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    pub prometheus: Option<String>,
    pub otlp: Option<String>,
    pub otlp_interval: Duration,
}

/// Where the trace is, for labels and resource attributes.
pub struct Traced<'a> {
    /// The file traced, to read symbols from (`/proc/PID/exe` for -p).
    pub binary: &'a Path,
    /// Its name in labels: as the traced process names it (canonical for -b and -c; a
    /// -p process's own path in its mount namespace, `/app/server` in a container).
    pub name: &'a Path,
    /// The one process traced (-p, -c); none with -b.
    pub pid: Option<u32>,
    /// The binary's main module path (`service.name`), if it has build info.
    pub module: Option<&'a str>,
    /// The trace's symbolizer: interface types and stack frames by name.
    pub symbols: Arc<crate::trace::symbols::TargetSymbols>,
}

/// The exporters of one trace (none when no option asks for one).
pub struct Export {
    plan: Plan,
    exports: Vec<names::MapExport>,
    listener: Option<TcpListener>,
    otlp: Option<(String, Duration)>,
    counters: Arc<Counters>,
    server: Option<server::Server>,
    pusher: Option<Arc<otlp::Pusher>>,
    spans: Option<Arc<traces::SpanSender>>,
}

/// What `--otlp` never sent: printed lines, spans.
pub type Unsent = (Option<otlp::UnsentLogs>, Option<traces::UnsentSpans>);

impl Export {
    /// Checks every name, binds the address and parses the URL: what can fail does so
    /// here, before any probe is attached.
    pub fn prepare(options: &ExportOptions, plan: &Plan) -> Result<Export, ExportError> {
        let wanted = options.prometheus.is_some() || options.otlp.is_some();
        let exports = if wanted { names::plan_exports(plan, &selfmetrics::own_families())? } else { Vec::new() };
        for e in exports.iter().filter(|e| e.shape == names::Shape::NotExported) {
            eprintln!("gtrace: {} holds values that are not numbers: it is not exported as a metric", e.display);
        }
        let listener = options.prometheus.as_deref().map(server::bind).transpose()?;
        let otlp = match &options.otlp {
            Some(_) if options.otlp_interval < Duration::from_millis(100) => {
                return Err(ExportError::Interval { given: options.otlp_interval })
            }
            Some(url) => Some((check_url(url)?, options.otlp_interval)),
            None => None,
        };
        Ok(Export {
            plan: plan.clone(),
            exports,
            listener,
            otlp,
            counters: Arc::default(),
            server: None,
            pusher: None,
            spans: None,
        })
    }

    /// Starts serving and pushing, once `attached` probes are in place.
    pub fn start(&mut self, loaded: &Loaded, attached: usize, traced: &Traced) -> Result<(), Failure> {
        if self.listener.is_none() && self.otlp.is_none() {
            return Ok(());
        }
        self.counters.attached.store(attached as u64, Ordering::Relaxed);
        let reader = loaded.map_reader().map_err(Failure::from)?;
        let source = Arc::new(Source::new(
            self.plan.clone(),
            self.exports.clone(),
            reader,
            (traced.name, traced.pid),
            traced.symbols.clone(),
            self.counters.clone(),
        ));
        if let Some(listener) = self.listener.take() {
            let server = server::Server::spawn(listener, source.clone())?;
            eprintln!("Serving metrics at http://{}/metrics", server.addr);
            self.server = Some(server);
        }
        if let Some((url, interval)) = self.otlp.take() {
            if self.plan.events.iter().any(|e| matches!(e.kind, crate::plan::EventKind::Span { .. })) {
                let sender = traces::SpanSender::spawn(&url, &resource(traced))
                    .map_err(|source| ExportError::Start { source })?;
                self.spans = Some(Arc::new(sender));
            }
            let pushing = otlp::Pushing { url, interval, resource: resource(traced) };
            let pusher = otlp::Pusher::spawn(pushing, source).map_err(|source| ExportError::Start { source })?;
            self.pusher = Some(Arc::new(pusher));
        }
        Ok(())
    }

    /// Whether the trace loop should hand over its `Stats` now (exporting, and a second
    /// since the last time).
    pub fn stats_due(&self) -> bool {
        let exporting = self.server.is_some() || self.pusher.is_some();
        let mut last = self.counters.published.lock().unwrap_or_else(|e| e.into_inner());
        let due = exporting && last.is_none_or(|t| t.elapsed() >= STATS_EVERY);
        if due {
            *last = Some(std::time::Instant::now());
        }
        due
    }

    /// The kernel's counters as gtrace's own metrics, until the next publication.
    pub fn publish(&self, stats: &Stats) {
        *self.counters.kernel.lock().unwrap_or_else(|e| e.into_inner()) = selfmetrics::from_stats(stats, &self.plan);
    }

    /// The trace loop's sink, with printed lines counted (and queued for OTLP).
    pub fn sink(&self, inner: Box<dyn Sink>) -> Box<dyn Sink> {
        Box::new(ExportSink {
            inner,
            counters: self.counters.clone(),
            pusher: self.pusher.clone(),
            spans: self.spans.clone(),
        })
    }

    /// Pushes once more (OTLP) and stops serving; says which printed lines and spans
    /// never reached the OTLP collector.
    pub fn finish(&mut self) -> Unsent {
        let spans = self.spans.take().and_then(|sender| sender.finish());
        let unsent = (self.pusher.take().and_then(|pusher| pusher.finish()), spans);
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
        unsent
    }
}

fn check_url(url: &str) -> Result<String, ExportError> {
    let bad = |reason| ExportError::Url { url: url.to_string(), reason };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or(bad("it must start with http:// or https://"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(bad("it has no host"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// OpenTelemetry's resource attributes of the traced program.
fn resource(traced: &Traced) -> Vec<(String, String)> {
    let file = traced.name.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let service = traced.module.filter(|m| !m.is_empty()).map(str::to_string).unwrap_or(file);
    let mut attrs = vec![
        ("service.name".to_string(), service),
        ("process.executable.path".to_string(), traced.name.display().to_string()),
    ];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        attrs.push(("host.name".to_string(), host.trim().to_string()));
    }
    if let Some(pid) = traced.pid {
        attrs.push(("process.pid".to_string(), pid.to_string()));
    }
    attrs
}

/// A sink that counts printed lines and hands them to the OTLP pusher, then prints
/// them as before.
struct ExportSink {
    inner: Box<dyn Sink>,
    counters: Arc<Counters>,
    pusher: Option<Arc<otlp::Pusher>>,
    spans: Option<Arc<traces::SpanSender>>,
}

impl Sink for ExportSink {
    fn event(&mut self, event: &Event) -> Result<(), OutputError> {
        // With --otlp, spans go to the collector only.
        if let (Event::Span(s), Some(sender)) = (event, &self.spans) {
            sender.span((**s).clone());
            return Ok(());
        }
        let text = match event {
            Event::Printf { format, values } => Some(output::text::printf_exact(format, values)),
            Event::Print { labels, values } => Some(output::text::labelled_exact(labels, values)),
            _ => None,
        };
        if let Some(text) = text {
            self.counters.printed.fetch_add(1, Ordering::Relaxed);
            if let Some(p) = &self.pusher {
                let text = text.strip_suffix('\n').unwrap_or(&text).to_string();
                p.line(otlp::Line { time_unix_nano: otlp::now_unix_nano(), text });
            }
        }
        self.inner.event(event)
    }
    fn map(&mut self, dump: &MapDump) -> Result<(), OutputError> {
        self.inner.map(dump)
    }
    fn stats(&mut self, stats: &Stats) -> Result<(), OutputError> {
        self.inner.stats(stats)
    }
    fn flush(&mut self) -> Result<(), OutputError> {
        self.inner.flush()
    }
}
