//! A real OpenTelemetry Collector (its OTLP receiver and the contrib file exporter),
//! built once from the Go module proxy with the collector builder (ocb) and cached under
//! target/, started on loopback, writing what it receives as OTLP JSON lines to a file.
//! When it cannot be built: a SKIP, or with CI=true a failure.

use super::processes::{poll, scratch_dir, Owned};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The collector release built (core and contrib modules of one release).
pub const VERSION: &str = "v0.130.0";

const BUILDER: &str = "dist:
  name: otelcol-gtrace
  description: OpenTelemetry Collector for gtrace's tests (OTLP receiver, file exporter)
  output_path: OUT
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver VERSION
exporters:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter VERSION
";

static BUILDING: Mutex<()> = Mutex::new(());

/// The collector binary, built on first use (a few minutes; then cached).
pub fn binary(test: &str) -> Option<PathBuf> {
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = super::root().join(format!("target/otelcol-{VERSION}"));
    let bin = dir.join("otelcol-gtrace");
    if bin.is_file() {
        return Some(bin);
    }
    match build(&dir) {
        Ok(built) => {
            std::fs::rename(built, &bin).expect("move the collector into place");
            Some(bin)
        }
        Err(why) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test}: cannot build the OpenTelemetry Collector, and CI=true:\n{why}");
            }
            eprintln!("SKIP {test}: cannot build the OpenTelemetry Collector:\n{why}");
            None
        }
    }
}

fn build(dir: &Path) -> Result<PathBuf, String> {
    let out = dir.join("build");
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let config = dir.join("builder.yaml");
    let text = BUILDER.replace("OUT", &out.display().to_string()).replace("VERSION", VERSION);
    std::fs::write(&config, text).map_err(|e| e.to_string())?;
    let result = Command::new("go")
        .args(["run", &format!("go.opentelemetry.io/collector/cmd/builder@{VERSION}"), "--config"])
        .arg(&config)
        .current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        // The module proxy here serves modules but not the checksum database.
        .env("GOSUMDB", "off")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .map_err(|e| format!("cannot run go: {e}"))?;
    let built = out.join("otelcol-gtrace");
    if result.status.success() && built.is_file() {
        Ok(built)
    } else {
        let log = String::from_utf8_lossy(&result.stderr);
        let tail: Vec<&str> = log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        Err(tail.join("\n"))
    }
}

/// A collector receiving OTLP/HTTP on 127.0.0.1:`port`, writing to `out`; `url` is what
/// `--otlp` is given.
pub struct Collector {
    _child: Owned,
    pub out: PathBuf,
    pub url: String,
}

/// The set-up of every test that sends to a collector: root (said, or with CI=true a
/// failure, by `privileged`), the collector built, started on a free port, its files
/// under a scratch folder named `name`. None when the test cannot run (already said).
pub fn for_test(test: &str, name: &str) -> Option<Collector> {
    if !super::privileged(test) {
        return None;
    }
    let otelcol = binary(test)?;
    Some(Collector::start(&otelcol, super::processes::free_port(), name))
}

impl Collector {
    pub fn start(binary: &Path, port: u16, name: &str) -> Collector {
        let dir = scratch_dir(name);
        let out = dir.join("received.json");
        let config = dir.join("otelcol.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
exporters:
  file:
    path: {}
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [file]
    logs:
      receivers: [otlp]
      exporters: [file]
    traces:
      receivers: [otlp]
      exporters: [file]
",
                out.display()
            ),
        )
        .expect("write the collector's config");
        let child = Command::new(binary)
            .arg(format!("--config={}", config.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the collector");
        let up = poll(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).ok());
        assert!(up.is_some(), "the collector does not listen on {port}");
        Collector { _child: Owned(child), out, url: format!("http://127.0.0.1:{port}") }
    }

    /// Every span received so far, as OTLP JSON.
    pub fn spans(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for r in self.received() {
            for rs in r["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    out.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        out
    }

    /// The spans received once there are at least `n` (or after 10 s, those there are).
    pub fn wait_spans(&self, n: usize) -> Vec<Value> {
        let got = poll(Duration::from_secs(10), || Some(self.spans()).filter(|s| s.len() >= n));
        got.unwrap_or_else(|| self.spans())
    }

    /// Every request received so far, as OTLP JSON.
    pub fn received(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

/// A span's attribute as text (OTLP JSON writes int64 as a string).
pub fn span_attribute(span: &Value, key: &str) -> Option<String> {
    let kv = span["attributes"].as_array()?.iter().find(|a| a["key"] == key)?;
    let v = &kv["value"];
    v["intValue"].as_str().or(v["stringValue"].as_str()).map(String::from)
}

/// The string value of resource attribute `key` in an OTLP JSON request.
pub fn resource_attribute(request: &Value, key: &str) -> Option<String> {
    let resources = request["resourceMetrics"].as_array().or(request["resourceLogs"].as_array())?;
    resources[0]["resource"]["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .and_then(|a| a["value"]["stringValue"].as_str().map(String::from))
}

/// The metric `name` in an OTLP JSON metrics request.
pub fn metric<'a>(request: &'a Value, name: &str) -> Option<&'a Value> {
    request["resourceMetrics"].as_array()?.iter().find_map(|rm| {
        rm["scopeMetrics"]
            .as_array()?
            .iter()
            .find_map(|sm| sm["metrics"].as_array()?.iter().find(|m| m["name"] == name))
    })
}

/// A data point's attributes as (key, string value).
pub fn attributes(point: &Value) -> Vec<(String, String)> {
    point["attributes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    (
                        kv["key"].as_str().unwrap_or_default().to_string(),
                        kv["value"]["stringValue"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON number, or a 64-bit integer as OTLP JSON writes it (a string).
pub fn number(v: &Value) -> f64 {
    v.as_f64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or(f64::NAN)
}
