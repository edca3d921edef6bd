//! Corrupted and foreign binaries, made by the test from a real Go build: truncated at
//! several points; bytes flipped in .gopclntab, .debug_info, .go.buildinfo, the ELF
//! header, the section and program headers; other architectures (GOARCH=arm64, 386).
//! `gtrace -l` and `gtrace --check` on each: never a panic (exit 101, a backtrace),
//! never a hang, and every failure a clear error (`error: ...`, exit 1); and where only
//! the DWARF is broken, a script that reads no Go value still compiles.
//! Binaries that once broke gtrace are kept as cases here.

mod support;

use object::{Object, ObjectSection};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Far more than one run takes; a hang exceeds it.
const BOUND: Duration = Duration::from_secs(60);

/// A script that reaches parameters, results, DWARF types and return sites.
const SCRIPT: &str = "on entry main.add { @s = sum(a); @c[b] = count() } on return main.add { @h = hist(elapsed); @r = sum(ret) } on entry \"main.*\" { @n[func] = count() }";

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corrupted");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs gtrace on `binary`, bounded, with the test's own cache directory (never the
/// user's: a corrupted variant's cache file must neither reach it nor come from another
/// test); returns (exit code, stderr).
fn gtrace_on(args: &[&str], what: &str) -> (i32, String) {
    gtrace_cached(args, &support::private_cache(), what)
}

/// `gtrace_on` with `XDG_CACHE_HOME` set to `cache`.
fn gtrace_cached(args: &[&str], cache: &Path, what: &str) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gtrace"));
    command.env("XDG_CACHE_HOME", cache);
    let mut child =
        command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let code = support::wait_bounded(&mut child, BOUND, &format!("{what}: gtrace {args:?}"));
    (code, reader.join().unwrap())
}

/// Both commands on `binary`: no panic, no hang, a clear error when they fail.
fn check_binary(binary: &Path, what: &str) -> [i32; 2] {
    let b = binary.to_str().unwrap();
    let mut codes = [0; 2];
    for (i, args) in [vec!["-l", "main.*", "-b", b], vec!["-e", SCRIPT, "--check", "-b", b]].iter().enumerate() {
        let (code, stderr) = gtrace_on(args, what);
        assert!(
            code != 101 && !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
            "{what}: gtrace {args:?} panicked (exit {code}):\n{stderr}"
        );
        assert!(code == 0 || code == 1, "{what}: gtrace {args:?} exit {code}:\n{stderr}");
        if code == 1 {
            assert!(stderr.starts_with("error") || stderr.contains("\nerror"), "{what}: no clear error:\n{stderr}");
        }
        codes[i] = code;
    }
    codes
}

/// Writes `data` as a variant named `name` and checks it.
fn variant(name: &str, data: &[u8]) -> [i32; 2] {
    let path = dir().join(name);
    std::fs::write(&path, data).unwrap();
    let codes = check_binary(&path, name);
    std::fs::remove_file(&path).unwrap();
    codes
}

/// The file range of section `name`.
fn section_range(data: &[u8], name: &str) -> Option<(usize, usize)> {
    let file = object::File::parse(data).ok()?;
    let (start, size) = file.section_by_name(name)?.file_range()?;
    Some((start as usize, size as usize))
}

fn go_binary() -> (PathBuf, Vec<u8>) {
    let bin = support::go_build("e2e", &[]);
    let data = std::fs::read(&bin).unwrap();
    (bin, data)
}

#[test]
fn truncated_binaries_are_clear_errors() {
    let (bin, data) = go_binary();
    assert_eq!(check_binary(&bin, "the intact build"), [0, 0]);
    let n = data.len();
    for cut in [0, 1, 4, 63, 64, 200, n / 100, n / 10, n / 3, n / 2, 9 * n / 10, 99 * n / 100, n - 1] {
        let codes = variant(&format!("truncated-{cut}"), &data[..cut]);
        assert_eq!(codes, [1, 1], "a binary cut at {cut} of {n} bytes is an error");
    }
}

/// Flips `len` bytes at each of `count` places spread over `range` (and, in one
/// variant, every 97th byte of it).
fn flip_variants(data: &[u8], label: &str, (start, size): (usize, usize)) {
    assert!(size > 0, "{label} is empty");
    for k in 0..7 {
        let mut bad = data.to_vec();
        let at = start + size * k / 7;
        for b in &mut bad[at..(at + 4).min(start + size)] {
            *b ^= 0xa5;
        }
        variant(&format!("{label}-flip-{k}"), &bad);
    }
    let mut bad = data.to_vec();
    for i in (start..start + size).step_by(97) {
        bad[i] = !bad[i];
    }
    variant(&format!("{label}-flip-every-97th"), &bad);
}

#[test]
fn flipped_bytes_in_go_sections_are_clear_errors() {
    let (_, data) = go_binary();
    for section in [".gopclntab", ".go.buildinfo", ".debug_info", ".debug_abbrev", ".noptrdata", ".text"] {
        let range = section_range(&data, section).unwrap_or_else(|| panic!("no {section} in the build"));
        flip_variants(&data, section, range);
    }
}

#[test]
fn flipped_bytes_in_uncompressed_dwarf_are_clear_errors() {
    // Go compresses DWARF by default, so a flip there fails decompression; without
    // compression the flipped bytes reach the DWARF reader itself.
    let bin = support::go_build("e2e", &["-ldflags=-compressdwarf=false"]);
    let data = std::fs::read(&bin).unwrap();
    for section in [".debug_info", ".debug_abbrev", ".debug_str", ".debug_loclists", ".debug_rnglists", ".debug_addr"] {
        match section_range(&data, section) {
            Some(range) => flip_variants(&data, &format!("raw{section}"), range),
            // Older toolchains name some of them differently (.debug_loc, .debug_ranges).
            None => assert!(section != ".debug_info" && section != ".debug_abbrev", "no {section}"),
        }
    }
}

#[test]
fn a_forged_dwarf_compression_header_is_a_clear_error_at_once() {
    // The size a compressed .debug_info's header claims (Elf64_Chdr.ch_size, 8 bytes in):
    // one far past what its data can hold is refused before anything is allocated (it
    // once had 4 GiB zero-filled, 16 s), and one short of the data (the stream runs on)
    // or past it (the stream ends first) is an error saying so, never a reader given the
    // first bytes only. (A stream cut short is the flipped and truncated cases'.)
    let (_, data) = go_binary();
    let (start, _) = section_range(&data, ".debug_info").expect(".debug_info");
    let file = object::File::parse(&*data).unwrap();
    let real = file.section_by_name(".debug_info").unwrap().compressed_data().unwrap().uncompressed_size;
    assert!(real > 0x2000, "the build's .debug_info is not compressed: {real}");
    for (claim, said) in [(1u64 << 32, "more than"), (real / 2, "past"), (real + 4096, "inflates to")] {
        let mut bad = data.clone();
        bad[start + 8..start + 16].copy_from_slice(&claim.to_le_bytes());
        let path = dir().join(format!("chdr-{claim}"));
        std::fs::write(&path, &bad).unwrap();
        let b = path.to_str().unwrap();
        let (code, stderr) = gtrace_on(&["-e", "on entry main.add { @s = sum(a) }", "--check", "-b", b], "a claim");
        assert_eq!(code, 1, "a .debug_info claiming {claim} bytes of {real}:\n{stderr}");
        assert!(stderr.contains("cannot decompress section .debug_info") && stderr.contains(said), "{said}: {stderr}");
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn a_script_that_reads_no_go_value_compiles_when_the_dwarf_is_corrupted() {
    // Functions, entries and RETs come from the symbol table and the code: a script
    // that names no Go value never reads DWARF (issue 26), so a broken .debug_info does
    // not stop it, while one that reads a parameter is a clear error on the same file.
    let (_, data) = go_binary();
    let (start, size) = section_range(&data, ".debug_info").expect(".debug_info");
    let mut bad = data.clone();
    for i in (start..start + size).step_by(97) {
        bad[i] = !bad[i];
    }
    let path = dir().join("no-values-bad-dwarf");
    std::fs::write(&path, &bad).unwrap();
    let b = path.to_str().unwrap();
    let plain = "on entry main.add { @c = count() } on return main.add { @r[func] = count() }";
    let (code, stderr) = gtrace_on(&["-e", plain, "--check", "-b", b], "no values, bad DWARF");
    assert_eq!(code, 0, "a script without Go values on a binary with bad DWARF:\n{stderr}");
    let (code, stderr) = gtrace_on(&["-e", "on entry main.add { @s = sum(a) }", "--check", "-b", b], "a parameter");
    assert_eq!(code, 1, "reading a parameter needs the DWARF:\n{stderr}");
    assert!(stderr.starts_with("error") && stderr.contains(".debug_info"), "{stderr}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn damaged_dwarf_inflated_early_is_the_same_clear_error() {
    // A first run (no cache file for the build) whose script reads Go values inflates
    // .debug_info on another thread while the binary is read; a run with a cache file
    // there inflates it where the first question needs it. Damaged, either way the
    // same clear error, never a panic or a hang; and a script the early guess counts
    // as reading DWARF (it times calls, names the goroutine) but that needs none of it
    // still compiles.
    let (_, data) = go_binary();
    let (start, size) = section_range(&data, ".debug_info").expect(".debug_info");
    let mut bad = data.clone();
    for i in (start + size / 3..start + size).step_by(89) {
        bad[i] = !bad[i];
    }
    let path = dir().join("inflated-early-bad-dwarf");
    std::fs::write(&path, &bad).unwrap();
    let b = path.to_str().unwrap();
    let cache = dir().join("inflated-early-cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let reads = ["-e", "on entry main.add { @s = sum(a) }", "--check", "-b", b];
    let (code, early) = gtrace_cached(&reads, &cache, "inflated early");
    assert_eq!(code, 1, "a parameter of a binary whose DWARF does not inflate:\n{early}");
    assert!(early.starts_with("error") && early.contains("cannot decompress section .debug_info"), "{early}");
    assert!(!early.contains("panicked"), "{early}");
    let (code, nocache) = gtrace_cached(&[&reads[..], &["--no-cache"]].concat(), &cache, "--no-cache");
    assert_eq!((code, &nocache), (1, &early), "--no-cache inflates early too");
    // A script that reads no Go value writes the cache file (where main.add was inlined);
    // with it there, the next run inflates in line.
    let timed = "on return main.add { @h = hist(elapsed); @g[goid] = count() }";
    let (code, said) = gtrace_cached(&["-e", timed, "--check", "-b", b], &cache, "timed, guessed");
    assert_eq!(code, 0, "a script that needs no DWARF, guessed to:\n{said}");
    let files = std::fs::read_dir(cache.join("gtrace")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(files, 1, "a cache file for the build");
    let (code, in_line) = gtrace_cached(&reads, &cache, "inflated in line");
    assert_eq!((code, &in_line), (1, &early), "the same error inflated in line and early");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn corrupted_elf_headers_are_clear_errors() {
    let (_, data) = go_binary();
    // Every field of the ELF header after the identification bytes, set to all ones.
    for at in (0..64).step_by(2) {
        let mut bad = data.clone();
        bad[at] = 0xff;
        bad[at + 1] = 0xff;
        variant(&format!("elf-header-{at}"), &bad);
    }
    let u64_at = |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap()) as usize;
    let u16_at = |d: &[u8], o: usize| u16::from_le_bytes(d[o..o + 2].try_into().unwrap()) as usize;
    // Section headers: name, offset, size and link fields of a spread of sections.
    let (shoff, shnum) = (u64_at(&data, 0x28), u16_at(&data, 0x3c));
    for s in (1..shnum).step_by(3) {
        for (field, width) in [(0, 4), (0x18, 8), (0x20, 8), (0x28, 4), (0x38, 8)] {
            let mut bad = data.clone();
            let at = shoff + 64 * s + field;
            for b in &mut bad[at..at + width] {
                *b = 0xff;
            }
            variant(&format!("section-header-{s}-{field:x}"), &bad);
        }
    }
    // Program headers: offset, address and sizes of every segment.
    let (phoff, phnum) = (u64_at(&data, 0x20), u16_at(&data, 0x38));
    for p in 0..phnum {
        for field in [0x08, 0x10, 0x20, 0x28] {
            let mut bad = data.clone();
            let at = phoff + 56 * p + field;
            bad[at + 5] ^= 0x7f;
            variant(&format!("program-header-{p}-{field:x}"), &bad);
        }
    }
}

#[test]
fn other_architectures_are_read_or_refused_clearly() {
    for arch in ["arm64", "386"] {
        let bin = support::go_build_env("e2e", &[], &[("GOARCH", arch), ("CGO_ENABLED", "0")]);
        check_binary(&bin, &format!("GOARCH={arch}"));
    }
}
