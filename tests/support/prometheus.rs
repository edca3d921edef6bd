//! A real Prometheus server (Debian's `prometheus` package), started on loopback with a
//! scrape config pointing at gtrace's endpoint, and asked through its HTTP query API.
//! Missing, it is a SKIP; with CI=true, a failure.

use super::processes::{free_port, poll, scratch_dir, Owned};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

pub struct Prometheus {
    _child: Owned,
    base: String,
}

/// The labels of a series and its value.
pub type Series = (BTreeMap<String, String>, f64);

/// The `prometheus` binary, or None (SKIP) when it is not installed and CI is not set.
pub fn binary(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{test}: prometheus is not installed (apt-get install prometheus), and CI=true");
        }
        eprintln!("SKIP {test}: needs Prometheus (apt-get install prometheus)");
    }
    found
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (HOST:PORT) every second; waits until ready.
    pub fn start(binary: &std::path::Path, target: &str, name: &str) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gtrace\n    static_configs:\n      - targets: ['{target}']\n"
        );
        Prometheus::start_with_config(binary, &config, name)
    }

    /// `start` with native histograms on: Prometheus then asks for protobuf.
    pub fn start_native(binary: &std::path::Path, target: &str, name: &str) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gtrace\n    static_configs:\n      - targets: ['{target}']\n"
        );
        Prometheus::start_with(binary, &config, name, &["--enable-feature=native-histograms"])
    }

    /// `start` with exemplar storage on: Prometheus keeps the exemplars it scrapes
    /// (asking for OpenMetrics text, as it does by default) and answers
    /// /api/v1/query_exemplars.
    pub fn start_exemplars(binary: &std::path::Path, target: &str, name: &str) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gtrace\n    static_configs:\n      - targets: ['{target}']\n"
        );
        Prometheus::start_with(binary, &config, name, &["--enable-feature=exemplar-storage"])
    }

    /// The exemplars of the series `query` selects over the last hour: each one's labels
    /// and value, as /api/v1/query_exemplars gives them.
    pub fn exemplars(&self, query: &str) -> Vec<Series> {
        let url = format!("{}/api/v1/query_exemplars", self.base);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (start, end) = ((now - 3600).to_string(), (now + 60).to_string());
        let call = ureq::get(&url).query("query", query).query("start", &start).query("end", &end).call();
        let Ok(mut response) = call else { return Vec::new() };
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let mut out = Vec::new();
        for series in body["data"].as_array().into_iter().flatten() {
            for e in series["exemplars"].as_array().into_iter().flatten() {
                let Some(labels) = e["labels"].as_object() else { continue };
                let labels =
                    labels.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect();
                let value: f64 = e["value"].as_str().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
                out.push((labels, value));
            }
        }
        out
    }

    /// Starts Prometheus with the configuration `config` (YAML); waits until ready.
    pub fn start_with_config(binary: &std::path::Path, config: &str, name: &str) -> Prometheus {
        Prometheus::start_with(binary, config, name, &[])
    }

    /// `start_with_config` with extra command-line arguments.
    pub fn start_with(binary: &std::path::Path, config: &str, name: &str, args: &[&str]) -> Prometheus {
        let dir = scratch_dir(name);
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).expect("write prometheus.yml");
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { _child: Owned(child), base: format!("http://127.0.0.1:{port}") };
        let ready = poll(Duration::from_secs(30), || {
            ureq::get(&format!("{}/-/ready", prometheus.base)).call().ok().filter(|r| r.status() == 200)
        });
        assert!(ready.is_some(), "prometheus did not become ready");
        prometheus
    }

    /// The instant vector `query` evaluates to now.
    pub fn query(&self, query: &str) -> Vec<Series> {
        let url = format!("{}/api/v1/query", self.base);
        let Ok(mut response) = ureq::get(&url).query("query", query).call() else { return Vec::new() };
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let Some(result) = body["data"]["result"].as_array() else { return Vec::new() };
        result
            .iter()
            .filter_map(|s| {
                let labels = s["metric"]
                    .as_object()?
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect();
                let value: f64 = s["value"][1].as_str()?.parse().ok()?;
                Some((labels, value))
            })
            .collect()
    }

    /// The single value of `query`, once `done` accepts it (at most 30s: Prometheus
    /// scrapes every second); panics with the last value otherwise.
    pub fn value_when(&self, query: &str, done: impl Fn(f64) -> bool) -> f64 {
        let got = poll(Duration::from_secs(30), || {
            let v = self.query(query);
            v.first().map(|s| s.1).filter(|x| v.len() == 1 && done(*x))
        });
        got.unwrap_or_else(|| panic!("`{query}` never reached the expected value; last: {:?}", self.query(query)))
    }
}
