//! Building the Go test programs with a given toolchain ("local", or a release such as
//! "go1.17.13" fetched through the Go module proxy with GOTOOLCHAIN) and a given kind of
//! binary (stripped or not, PIE or not, cgo or not), for this host or cross-compiled for
//! another GOARCH, cached under target/gobin by a hash of sources, toolchain, kind and
//! architecture.
//!
//! GTRACE_GO_VERSIONS (space-separated, e.g. `go1.21.13 local`) replaces the default
//! toolchain list.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

/// The oldest release gtrace supports and the newest one published, tested by default.
pub const OLDEST: &str = "go1.17.13";
pub const NEWEST: &str = "go1.27.4";

/// The toolchains to test: local, the oldest and the newest, or GTRACE_GO_VERSIONS.
pub fn toolchains() -> Vec<String> {
    match std::env::var("GTRACE_GO_VERSIONS") {
        Ok(v) if !v.trim().is_empty() => v.split_whitespace().map(str::to_string).collect(),
        _ => vec!["local".to_string(), OLDEST.to_string(), NEWEST.to_string()],
    }
}

/// One way of building a program.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Kind {
    pub stripped: bool,
    pub pie: bool,
    pub cgo: bool,
}

/// A plain executable with symbols and DWARF, no cgo.
pub const PLAIN: Kind = Kind { stripped: false, pie: false, cgo: false };

impl Kind {
    pub fn unstripped(self) -> Kind {
        Kind { stripped: false, ..self }
    }
    pub fn label(self) -> String {
        format!(
            "{}{}{}",
            if self.stripped { "stripped" } else { "symbols" },
            if self.pie { "-pie" } else { "-exe" },
            if self.cgo { "-cgo" } else { "" }
        )
    }
}

/// Why a build did not happen.
pub enum NotBuilt {
    /// The toolchain could not be fetched (no network to the proxy, unknown release).
    NoToolchain(String),
}

/// Builds tests/go/<dir> with `toolchain` as `kind`, cached under target/gobin.
pub fn build(dir: &str, toolchain: &str, kind: Kind) -> Result<PathBuf, NotBuilt> {
    build_for(dir, toolchain, kind, None)
}

/// `build` for another architecture: `Some("arm64")` cross-compiles with GOARCH=arm64
/// (None: the host's).
pub fn build_for(dir: &str, toolchain: &str, kind: Kind, goarch: Option<&str>) -> Result<PathBuf, NotBuilt> {
    let src = super::root().join("tests/go").join(dir);
    let mut hasher = DefaultHasher::new();
    super::hash_tree(&src, &mut hasher);
    toolchain.hash(&mut hasher);
    kind.hash(&mut hasher);
    if toolchain == "local" {
        super::go_version().hash(&mut hasher);
    }
    if let Some(arch) = goarch {
        arch.hash(&mut hasher);
    }
    let out_dir = super::root().join("target/gobin");
    std::fs::create_dir_all(&out_dir).expect("create target/gobin");
    let arch_label = goarch.map(|a| format!("-{a}")).unwrap_or_default();
    let out = out_dir.join(format!("{dir}-{toolchain}-{}{arch_label}-{:016x}", kind.label(), hasher.finish()));
    if out.exists() {
        return Ok(out);
    }
    let tmp = super::unique_tmp(&out_dir, dir);
    let mut cmd = Command::new("go");
    cmd.arg("build").arg("-o").arg(&tmp);
    if kind.pie {
        cmd.arg("-buildmode=pie");
    }
    if kind.stripped {
        cmd.arg("-ldflags=-s -w");
    }
    if let Some(arch) = goarch {
        cmd.env("GOARCH", arch);
    }
    let output = cmd
        .arg(".")
        .current_dir(&src)
        .env("GOTOOLCHAIN", toolchain)
        // Old toolchains reject flags newer ones accept (-buildvcs), so set GOFLAGS whole.
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", if kind.cgo { "1" } else { "0" })
        .output()
        .expect("run go build");
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        if err.contains("downloading go1") || err.contains("toolchain") && err.contains("not") {
            return Err(NotBuilt::NoToolchain(err));
        }
        panic!("go build of tests/go/{dir} with {toolchain} as {kind:?} failed:\n{err}");
    }
    super::publish(&tmp, &out);
    Ok(out)
}

/// `build` as a plain executable, or None, said loudly, when the toolchain cannot be
/// fetched.
pub fn build_plain(dir: &str, toolchain: &str) -> Option<PathBuf> {
    build_or_skip(dir, toolchain, PLAIN, None)
}

/// `build` cross-compiled for arm64 (GOARCH=arm64), or None when the toolchain cannot be
/// fetched (see `no_toolchain`).
pub fn build_arm64(dir: &str, toolchain: &str, kind: Kind) -> Option<PathBuf> {
    build_or_skip(dir, toolchain, kind, Some("arm64"))
}

fn build_or_skip(dir: &str, toolchain: &str, kind: Kind, goarch: Option<&str>) -> Option<PathBuf> {
    match build_for(dir, toolchain, kind, goarch) {
        Ok(p) => Some(p),
        Err(NotBuilt::NoToolchain(err)) => {
            no_toolchain(toolchain, &err);
            None
        }
    }
}

/// A toolchain that cannot be fetched: SKIP said loudly, or on CI a failure (CI must
/// test the oldest and newest releases it claims to support).
pub fn no_toolchain(toolchain: &str, err: &str) {
    super::skip(
        toolchain,
        &format!(
            "the toolchain cannot be fetched through the Go module proxy:
{err}"
        ),
    );
}
