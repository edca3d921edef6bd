//! Compiles pprof's profile.proto (proto/) into prost's Rust types for `--pprof`, with
//! protox (a protobuf compiler in Rust: no protoc needed) and prost-build; and names
//! this build of gtrace by a hash of what it is built from (`GTRACE_BUILD_HASH`), which
//! the cache's files carry: a file written by another build of the same version is
//! not used (src/cache/format.rs).

use std::path::{Path, PathBuf};

/// What gtrace is built from: its sources, grammar, libraries, protobuf and manifests.
const INPUTS: &[&str] = &["src", "grammar", "stdlib", "proto", "build.rs", "Cargo.toml", "Cargo.lock"];

/// The kinds of file among them that are built from (an editor's swap file is not).
const BUILT_FROM: &[&str] = &["rs", "pest", "gt", "proto", "toml", "lock"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    let files = protox::compile(["profile.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(files)?;
    build_hash()?;
    Ok(())
}

/// Sets `GTRACE_BUILD_HASH`: FNV-1a (64 bits) of every input file's path and bytes, in
/// the order of their paths. The profile is not in it: a debug and a release build of
/// the same sources write the same cache files, and take each other's.
fn build_hash() -> std::io::Result<()> {
    let mut files = Vec::new();
    for input in INPUTS {
        println!("cargo:rerun-if-changed={input}");
        collect(Path::new(input), &mut files)?;
    }
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in &files {
        feed(file.to_string_lossy().as_bytes());
        feed(&[0]);
        feed(&std::fs::read(file)?);
    }
    println!("cargo:rustc-env=GTRACE_BUILD_HASH={hash:016x}");
    Ok(())
}

/// Every file at or under `path` of a kind in `BUILT_FROM` (none when it does not exist).
fn collect(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_file() {
        let kind = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !BUILT_FROM.contains(&kind) {
            return Ok(());
        }
        out.push(path.to_path_buf());
    } else if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            collect(&entry?.path(), out)?;
        }
    }
    Ok(())
}
