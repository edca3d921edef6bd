//! The Go runtime's AES map hash as gtrace's eBPF computes it (`m[k]`), bit for bit
//! against the runtime's own: tests/go/aeshash prints its `aeskeysched` and the hashes
//! its runtime gives integer keys of 1, 2, 4 and 8 bytes and byte strings of 0 to 128
//! bytes (every length class); for each, the program gtrace generates for that key
//! (lower::hashcheck, in the shape the binary's instruction set gives) runs in
//! bpf::interp with that `aeskeysched` as the target's memory and must give the same
//! hash. arm64 builds run under qemu-user (`qemu-aarch64`, Debian's qemu-user: with
//! its default CPU the runtime hashes with AES), amd64 builds natively. Each build's
//! hash keys found in its code must be those of its symbol table (and a stripped arm64
//! build's, found in its code, those of the same build with symbols). Pure: no privileges;
//! without qemu-aarch64 the arm64 test says SKIP (fails with CI=true).

mod support;

use gtrace::bpf::interp::{run, World};
use gtrace::gobin::{AesGlobals, Target};
use gtrace::lower::hashcheck::{hash_maps, hash_program, HashKey};
use std::path::Path;
use std::process::Command;
use support::toolchain::{build_for, Kind, NotBuilt, NEWEST, OLDEST, PLAIN};

/// The releases of each map hash's shape: the oldest, the bucket layout's last (which
/// lets no program reach memhash32/64: no integer vectors), the local one, the newest
/// (internal/runtime/maps' hash since 1.27).
const TOOLCHAINS: [&str; 4] = [OLDEST, "go1.23.12", "local", NEWEST];

/// One vector the Go program printed.
struct Vector {
    key: HashKey,
    seed: u64,
    hash: u64,
}

/// The program's `aeskeysched`, and its vectors.
fn parse(out: &str) -> (Vec<u8>, Vec<Vector>) {
    let mut keysched = Vec::new();
    let mut vectors = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f[i].parse::<u64>().unwrap_or_else(|e| panic!("{line}: {e}"));
        match f[0] {
            "keysched" => keysched = hex(f[1]),
            "aes" => assert_eq!(f[1], "1", "the runtime must hash with AES here (it printed aes {})", f[1]),
            "int" => {
                vectors.push(Vector { key: HashKey::Int { size: num(1), value: num(3) }, seed: num(2), hash: num(4) })
            }
            "bytes" => {
                let bytes = if f[2] == "-" { Vec::new() } else { hex(f[2]) };
                vectors.push(Vector { key: HashKey::Bytes(bytes), seed: num(1), hash: num(3) })
            }
            other => panic!("unknown line {other}"),
        }
    }
    assert_eq!(keysched.len(), 128, "aeskeysched is 128 bytes");
    (keysched, vectors)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// Builds and runs tests/go/aeshash with `toolchain` for `goarch` (`runner` runs it),
/// and checks every hash it printed; how many were checked.
fn hashes_match(toolchain: &str, goarch: &str, runner: Option<&Path>) -> usize {
    let bin = match build_for("aeshash", toolchain, PLAIN, Some(goarch)) {
        Ok(bin) => bin,
        Err(NotBuilt::NoToolchain(err)) => {
            support::toolchain::no_toolchain(toolchain, &err);
            return 0;
        }
    };
    let target = Target::open(&bin).unwrap_or_else(|e| panic!("{toolchain} {goarch}: {e}"));
    let aes = target.aes_globals().unwrap_or_else(|| panic!("{toolchain} {goarch}: no hash keys found in the code"));
    let symbols = target.aes_globals_from_symbols();
    assert_eq!(Some(aes), symbols, "{toolchain} {goarch}: the keys found in the code are the symbols'");
    let out = match runner {
        Some(r) => Command::new(r).arg(&bin).output(),
        None => Command::new(&bin).output(),
    }
    .expect("run tests/go/aeshash");
    assert!(out.status.success(), "{toolchain} {goarch}: {}", String::from_utf8_lossy(&out.stderr));
    let (keysched, vectors) = parse(&String::from_utf8_lossy(&out.stdout));
    let world = World { maps: hash_maps(), user: vec![(aes.aeskeysched, keysched)], ..World::default() };
    let mut wrong = Vec::new();
    for v in &vectors {
        let prog = hash_program(aes, &v.key, v.seed).unwrap_or_else(|e| panic!("{e:?}"));
        let got = run(&prog, &world, 0).unwrap_or_else(|e| panic!("{toolchain} {goarch} {:?}: {e}", v.key));
        if got != v.hash {
            wrong.push(format!("{:?} seed {:#x}: runtime {:#x}, gtrace {got:#x}", v.key, v.seed, v.hash));
        }
    }
    assert!(
        wrong.is_empty(),
        "{toolchain} {goarch}: {} of {} hashes differ:\n{}",
        wrong.len(),
        vectors.len(),
        wrong.join("\n")
    );
    vectors.len()
}

fn check_all(goarch: &str, runner: Option<&Path>, shape: fn(&AesGlobals) -> bool) {
    for toolchain in TOOLCHAINS {
        let n = hashes_match(toolchain, goarch, runner);
        eprintln!("{goarch} {toolchain}: {n} hashes as the runtime's");
        if n > 0 {
            let bin = build_for("aeshash", toolchain, PLAIN, Some(goarch)).ok().expect("built above");
            let aes = Target::open(&bin).ok().and_then(|t| t.aes_globals()).expect("found above");
            assert!(shape(&aes), "{toolchain} {goarch}: {aes:?}");
            // Integer keys and every string length class: 168 vectors (Go 1.23: 134, without
            // 4- and 8-byte keys).
            assert!(n >= 130, "{toolchain} {goarch}: only {n} vectors");
        }
    }
}

#[test]
fn arm64_map_hashes_are_the_runtimes() {
    let Some(qemu) = support::container::tool("qemu-aarch64") else {
        support::skip("arm64_map_hashes_are_the_runtimes", "qemu-aarch64 is not installed (apt-get install qemu-user)");
        return;
    };
    check_all("arm64", Some(&qemu), |a| matches!(a.rounds, gtrace::arch::AesRounds::KeyFirst { .. }));
    // A stripped arm64 build: no symbol table, the keys from its code, where they are.
    let plain = build_for("aeshash", "local", PLAIN, Some("arm64")).ok().expect("built above");
    let stripped = build_for("aeshash", "local", Kind { stripped: true, ..PLAIN }, Some("arm64"))
        .unwrap_or_else(|_| panic!("build a stripped tests/go/aeshash"));
    let target = Target::open(&stripped).expect("open the stripped build");
    assert_eq!(target.aes_globals_from_symbols(), None, "a stripped binary has no symbol table");
    let want = Target::open(&plain).ok().and_then(|t| t.aes_globals_from_symbols());
    assert_eq!(
        target.aes_globals().map(|a| (a.use_aeshash, a.aeskeysched, a.rounds)),
        want.map(|a| (a.use_aeshash, a.aeskeysched, a.rounds)),
        "the stripped build's keys from its code"
    );
}

#[test]
fn amd64_map_hashes_are_the_runtimes() {
    if !cfg!(target_arch = "x86_64") {
        support::skip("amd64_map_hashes_are_the_runtimes", "an amd64 build runs on an x86-64 host");
        return;
    }
    check_all("amd64", None, |a| a.rounds == gtrace::arch::AesRounds::KeyLast);
}
