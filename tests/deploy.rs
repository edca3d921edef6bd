//! deploy/gtrace.yaml, the DaemonSet that runs gtrace on every node of a Kubernetes
//! cluster. No cluster runs here, so the manifest is checked for what can be checked
//! without one: it parses as YAML; every gtrace flag it uses is one `gtrace --help`
//! lists; the metrics are bound to the pod's own address (downward API), on the port
//! the Prometheus annotation and the NetworkPolicy name; hostPID and the privileges and
//! mounts tracing needs are there. Its script compiles against a real Go HTTP server,
//! and its entrypoint, run here as the DaemonSet would run it, finds a container the
//! test made, traces it and serves the program's own counts at the given address.

mod support;

use std::collections::BTreeSet;
use support::container::{self, Place, Proc, Scratch};
use support::processes::{free_port, Gtrace};
use yaml_rust2::{Yaml, YamlLoader};

fn manifest() -> Vec<Yaml> {
    let path = support::root().join("deploy/gtrace.yaml");
    let text = std::fs::read_to_string(&path).expect("read deploy/gtrace.yaml");
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("deploy/gtrace.yaml is not YAML: {e}"))
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter().find(|d| d["kind"].as_str() == Some(kind)).unwrap_or_else(|| panic!("no {kind} in the manifest"))
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec().map(|v| v.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Every long and short flag `gtrace --help` lists.
fn help_flags() -> BTreeSet<String> {
    let help = support::gtrace(&["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let mut flags = BTreeSet::new();
    for line in help.stdout.lines().map(str::trim_start).filter(|l| l.starts_with('-')) {
        for word in line.split([' ', ',']).filter(|w| w.len() > 1 && w.starts_with('-')) {
            flags.insert(word.split(['=', '<']).next().unwrap_or(word).to_string());
        }
    }
    assert!(flags.contains("--prometheus") && flags.contains("-b"), "{flags:?}");
    flags
}

/// The gtrace container of the DaemonSet.
fn gtrace_container(docs: &[Yaml]) -> &Yaml {
    let ds = of_kind(docs, "DaemonSet");
    let containers = ds["spec"]["template"]["spec"]["containers"].as_vec().expect("containers");
    containers.iter().find(|c| c["name"].as_str() == Some("gtrace")).expect("a gtrace container")
}

/// The entrypoint's own invocation of gtrace: the flags of its `exec "$GTRACE" ...` line.
fn entrypoint_flags(run_sh: &str) -> Vec<String> {
    let line = run_sh.lines().find(|l| l.trim_start().starts_with("exec \"$GTRACE\"")).expect("run.sh execs gtrace");
    line.split_whitespace().filter(|w| w.starts_with('-')).map(String::from).collect()
}

#[test]
fn the_manifest_is_yaml_and_uses_only_flags_gtrace_has() {
    let docs = manifest();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["Namespace", "ConfigMap", "DaemonSet", "NetworkPolicy"]);
    let config = of_kind(&docs, "ConfigMap");
    let run_sh = config["data"]["run.sh"].as_str().expect("run.sh in the ConfigMap");
    let c = gtrace_container(&docs);
    let args = strings(&c["args"]);
    let known = help_flags();
    let used: Vec<String> =
        args.iter().filter(|a| a.starts_with('-')).cloned().chain(entrypoint_flags(run_sh)).collect();
    assert!(used.contains(&"-b".to_string()) && used.contains(&"--prometheus".to_string()), "{used:?}");
    for flag in &used {
        assert!(known.contains(flag), "the manifest uses {flag}, which `gtrace --help` does not list: {known:?}");
    }
    // The script and the entrypoint come from the ConfigMap, where they are mounted.
    let mounts = c["volumeMounts"].as_vec().expect("volume mounts");
    let config_mount = mounts.iter().find(|m| m["name"].as_str() == Some("config")).expect("the config mount");
    let dir = config_mount["mountPath"].as_str().expect("mount path");
    let script = args.last().expect("the script is the last argument");
    for file in [script.as_str(), &strings(&c["command"])[1]] {
        let key = file.strip_prefix(&format!("{dir}/")).unwrap_or_else(|| panic!("{file} is not under {dir}"));
        assert!(config["data"][key].as_str().is_some(), "no {key} in the ConfigMap");
    }
}

#[test]
fn the_metrics_are_bound_to_the_pod_address_on_the_annotated_port() {
    let docs = manifest();
    let c = gtrace_container(&docs);
    let args = strings(&c["args"]);
    let at = args.iter().position(|a| a == "--prometheus").expect("--prometheus");
    let addr = &args[at + 1];
    let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
    // The host is the pod's IP from the downward API: never 0.0.0.0, never a fixed address.
    assert_eq!(host, "$(POD_IP)");
    let env = c["env"].as_vec().expect("env");
    let pod_ip = env.iter().find(|e| e["name"].as_str() == Some("POD_IP")).expect("POD_IP");
    assert_eq!(pod_ip["valueFrom"]["fieldRef"]["fieldPath"].as_str(), Some("status.podIP"));
    assert!(!docs.iter().any(|d| format!("{d:?}").contains("0.0.0.0")), "nothing binds 0.0.0.0");
    let ds = of_kind(&docs, "DaemonSet");
    let annotations = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"].as_str(), Some("true"));
    assert_eq!(annotations["prometheus.io/port"].as_str(), Some(port), "the annotation's port is --prometheus's");
    assert_eq!(annotations["prometheus.io/path"].as_str(), Some("/metrics"));
    let ports = c["ports"].as_vec().expect("ports");
    assert!(ports.iter().any(|p| p["containerPort"].as_i64().map(|n| n.to_string()).as_deref() == Some(port)));
    // Only what the NetworkPolicy lets in reaches that port.
    let policy = of_kind(&docs, "NetworkPolicy");
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"], ds["spec"]["selector"]["matchLabels"]);
    assert_eq!(strings(&policy["spec"]["policyTypes"]), ["Ingress"]);
    let allowed = &policy["spec"]["ingress"][0];
    assert_eq!(allowed["ports"][0]["port"].as_i64().map(|n| n.to_string()).as_deref(), Some(port));
    assert!(allowed["from"].as_vec().is_some_and(|f| !f.is_empty()), "ingress from named peers only");
}

#[test]
fn the_daemonset_has_what_tracing_needs() {
    let docs = manifest();
    let ds = of_kind(&docs, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"].as_bool(), Some(true), "/proc/PID/root of every container, and the host's pids");
    let c = gtrace_container(&docs);
    let sc = &c["securityContext"];
    let caps: BTreeSet<String> = strings(&sc["capabilities"]["add"]).into_iter().collect();
    let privileged = sc["privileged"].as_bool() == Some(true);
    for cap in ["BPF", "PERFMON", "SYS_PTRACE"] {
        assert!(privileged || caps.contains(cap), "CAP_{cap}: {caps:?}");
    }
    assert!(privileged || sc["seccompProfile"]["type"].as_str() == Some("Unconfined"), "bpf() past seccomp");
    // The node's cgroup hierarchy, for --cgroup.
    let volumes = pod["volumes"].as_vec().expect("volumes");
    let host_path = |name: &str| {
        volumes.iter().find(|v| v["name"].as_str() == Some(name)).and_then(|v| v["hostPath"]["path"].as_str())
    };
    let mounts = c["volumeMounts"].as_vec().expect("mounts");
    let mounted_from = |host: &str| {
        mounts
            .iter()
            .find(|m| m["name"].as_str().and_then(host_path) == Some(host))
            .and_then(|m| m["mountPath"].as_str())
    };
    assert_eq!(mounted_from("/sys/fs/cgroup"), Some("/host/sys/fs/cgroup"));
    assert!(mounted_from("/sys/kernel/tracing").is_some());
}

#[test]
fn the_configmap_script_compiles_against_a_go_http_server() {
    let docs = manifest();
    let script = of_kind(&docs, "ConfigMap")["data"]["fleet.gt"].as_str().expect("fleet.gt");
    let scratch = Scratch::new("deploy-script");
    let file = scratch.0.join("fleet.gt");
    std::fs::write(&file, script).expect("write the script");
    let server = support::go_build("httpserver", &[]);
    let r = support::check_against(&[file.to_str().unwrap()], &server);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(": ok,"), "{}", r.stderr);
}

/// The DaemonSet's command and args, run here: `sh run.sh ARGS` with the pod's
/// environment (POD_IP 127.0.0.1, a free port instead of the annotated one, which may be
/// taken here, and a script for the test program instead of the http one).
#[test]
fn the_entrypoint_traces_a_container_and_serves_at_the_pod_address() {
    let test = "the_entrypoint_traces_a_container_and_serves_at_the_pod_address";
    if !container::can_run(test) {
        return;
    }
    let docs = manifest();
    let scratch = Scratch::new("entrypoint");
    let run_sh = scratch.0.join("run.sh");
    std::fs::write(&run_sh, of_kind(&docs, "ConfigMap")["data"]["run.sh"].as_str().expect("run.sh")).expect("write");
    let script = scratch.0.join("fleet.gt");
    std::fs::write(&script, "on entry main.work { @calls = count() }").expect("write");
    let port = free_port().to_string();
    let c = gtrace_container(&docs);
    let args: Vec<String> = strings(&c["args"])
        .into_iter()
        .map(|a| {
            let a = a.replace("$(POD_IP)", "127.0.0.1").replace(":9464", &format!(":{port}"));
            if a.ends_with(".gt") {
                script.display().to_string()
            } else {
                a
            }
        })
        .collect();
    // A name of its own inside the container, so that the entrypoint finds this test's
    // container and no other.
    let name = format!("deploy-test-{}", std::process::id());
    let bin = scratch.program();
    let mut program = Proc::container_named(&bin, Place::Copy, &scratch.0, &name);
    let target_exe = format!("/app/{name}");
    let mut argv = vec![run_sh.to_str().unwrap()];
    argv.extend(args.iter().map(String::as_str));
    let mut g = with_env(&argv, &[("TARGET_EXE", &target_exe), ("GTRACE", env!("CARGO_BIN_EXE_gtrace"))]);
    let addr = g.serving();
    assert_eq!(addr, format!("127.0.0.1:{port}"));
    let found =
        format!("gtrace-fleet: pid {0} runs {target_exe}: tracing /proc/{0}/root{target_exe}", program.host_pid);
    assert!(g.err.text().lines().any(|l| l == found), "{}", g.err.text());
    let truth = program.run(77);
    let mut r = ureq::get(&format!("http://{addr}/metrics")).call().expect("scrape");
    let text = r.body_mut().read_to_string().expect("metrics");
    let want = format!("gtrace_calls_total{{binary=\"{target_exe}\"}} {}", truth.calls);
    assert!(text.lines().any(|l| l == want), "{want} in:\n{text}");
    program.finish();
    assert_eq!(g.stop("TERM"), 0, "{}", g.err.text());
}

/// `sh ARGV` with extra environment variables, read like gtrace.
fn with_env(argv: &[&str], env: &[(&str, &str)]) -> Gtrace {
    let sh = container::tool("sh").expect("sh");
    let mut full: Vec<&str> = Vec::new();
    let assigns: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    full.extend(assigns.iter().map(String::as_str));
    full.push("FIND_INTERVAL=0.2");
    full.push(sh.to_str().unwrap());
    full.extend(argv);
    Gtrace::start_command("env", &full)
}

/// The fleet, in small: two nodes (two gtraces, each with `-b` on its node's file and
/// `--prometheus` on its own address, as the DaemonSet runs them), each tracing a
/// container; a real Prometheus scraping both with the relabeling of
/// deploy/prometheus.yaml's job (Debian's Prometheus has no Kubernetes discovery, so the
/// targets come from a static config carrying the labels Kubernetes discovery would:
/// pod IP, annotations, node name). Prometheus's answers are the programs' own counts,
/// per node and summed, and a fleet-wide p99 (`histogram_quantile` over `sum by (le)`)
/// falls in the bucket of the union's 99th percentile.
#[test]
fn prometheus_scrapes_every_node_with_the_documented_job() {
    let test = "prometheus_scrapes_every_node_with_the_documented_job";
    if !container::can_run(test) {
        return;
    }
    let Some(prom_bin) = support::prometheus::binary(test) else { return };
    let job = documented_job();
    let script = "on entry main.work { @calls = count(); @arg = hist(i) }";
    let mut nodes = Vec::new();
    for (node, calls) in [("node-a", 300u64), ("node-b", 500)] {
        let scratch = Scratch::new(&format!("fleet-{node}"));
        let bin = scratch.program();
        let program = Proc::container(&bin, Place::Copy, &scratch.0.join("c"));
        let path = format!("/proc/{}/root/app/server", program.host_pid);
        let g = Gtrace::start(&["-b", &path, "--prometheus", "127.0.0.1:0", "-e", script]);
        let addr = g.serving();
        nodes.push((node, calls, scratch, program, g, addr));
    }
    let targets: Vec<String> = nodes.iter().map(|(node, _, _, _, _, addr)| discovered(node, addr)).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gtrace\n    static_configs:\n{}    relabel_configs:\n{}",
        targets.concat(),
        job
    );
    let prom = support::prometheus::Prometheus::start_with_config(&prom_bin, &config, "fleet-prometheus");
    let mut values = Vec::new();
    for (node, calls, _, program, _, _) in nodes.iter_mut() {
        let truth = program.run(*calls);
        values.extend(0..truth.calls);
        let q = format!("sum(gtrace_calls_total{{node=\"{node}\",binary=\"/app/server\"}})");
        prom.value_when(&q, |v| v == truth.calls as f64);
    }
    let total = values.len() as f64;
    assert_eq!(prom.value_when("sum(gtrace_calls_total)", |v| v == total), total);
    // The p99 of every node's calls at once, from the buckets: in the bucket of the
    // union's 99th percentile (rank ceil(0.99 n), as histogram_quantile ranks).
    values.sort_unstable();
    let rank = (0.99 * total).ceil() as usize;
    let p99 = values[rank - 1];
    let k = 64 - p99.leading_zeros();
    let (low, high) = (((1u64 << (k - 1)) - 1) as f64, ((1u64 << k) - 1) as f64);
    prom.value_when("sum(gtrace_arg_count)", |v| v == total);
    let q = prom.value_when("histogram_quantile(0.99, sum by (le) (gtrace_arg_bucket))", |_| true);
    assert!(low <= q && q <= high, "p99 {p99}: the fleet-wide quantile {q} is not in ({low}, {high}]");
    for (_, _, _, program, g, _) in nodes.iter_mut() {
        program.finish();
        assert_eq!(g.stop("TERM"), 0, "{}", g.err.text());
    }
}

/// deploy/prometheus.yaml's job: discovered by Kubernetes pods, its relabeling as YAML
/// (indented for a job of a config).
fn documented_job() -> String {
    let path = support::root().join("deploy/prometheus.yaml");
    let text = std::fs::read_to_string(&path).expect("read deploy/prometheus.yaml");
    let docs = YamlLoader::load_from_str(&text).expect("deploy/prometheus.yaml is YAML");
    let job = &docs[0]["scrape_configs"][0];
    assert_eq!(job["job_name"].as_str(), Some("gtrace"));
    let sd = &job["kubernetes_sd_configs"][0];
    assert_eq!(sd["role"].as_str(), Some("pod"));
    assert_eq!(strings(&sd["namespaces"]["names"]), ["gtrace"], "the DaemonSet's namespace");
    let mut out = String::new();
    yaml_rust2::YamlEmitter::new(&mut out).dump(&job["relabel_configs"]).expect("emit");
    out.trim_start_matches("---").lines().filter(|l| !l.trim().is_empty()).map(|l| format!("      {l}\n")).collect()
}

/// A static target carrying what Kubernetes pod discovery gives the DaemonSet's pod on
/// `node`, serving at `addr` (the pod IP and the annotated port).
fn discovered(node: &str, addr: &str) -> String {
    let (ip, port) = addr.rsplit_once(':').expect("HOST:PORT");
    format!(
        "      - targets: ['discovered-{node}:1']\n        labels:\n          __meta_kubernetes_pod_ip: '{ip}'\n          __meta_kubernetes_pod_annotation_prometheus_io_scrape: 'true'\n          __meta_kubernetes_pod_annotation_prometheus_io_port: '{port}'\n          __meta_kubernetes_pod_annotation_prometheus_io_path: /metrics\n          __meta_kubernetes_pod_node_name: {node}\n"
    )
}
