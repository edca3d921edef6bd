//! Cache files not to be used, by what they hold: another gtrace's or binary's, a
//! truncated or corrupted one, one claiming a huge blob or with a hole after its
//! blobs, another build's of this version, a lookup answer that is not the name asked,
//! DWARF from the cache said bad (compiled again without it), large maps made
//! ahead that are not the object's (from a forged description, or a file set aside),
//! and CRCs kept for a binary that has changed since (its stamp another).
//! Sites are not written beside DWARF other than the run read.

use super::*;

#[test]
fn a_cache_of_another_gtrace_or_another_binary_is_not_used() {
    let bin = support::go_build("e2e", &[]);
    let other = support::go_build("values", &[]);
    let home = cache_dir("foreign");
    let without = outputs(&bin, &home, &["--no-cache"]);
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let binary = format::For::new(target.build_ids(), target.file_size());

    // Written by another gtrace, for this binary, with its units emptied.
    let mut foreign = entry.clone();
    foreign.dwarf.as_mut().unwrap().bodies.iter_mut().for_each(|(_, b)| *b = vec![0; b.len()].into());
    std::fs::write(&file, format::encode_as("gtrace 0.0.0-other", &binary, &foreign)).unwrap();
    assert!(matches!(store(&home).load(&target), Err(format::Rejected::Writer { .. })));
    assert_eq!(outputs(&bin, &home, &[]), without, "a cache of another gtrace");
    assert_eq!(assert_valid(&home, &bin), entry, "written again by this gtrace");

    // Another binary's cache file under this binary's name.
    outputs(&other, &home, &[]);
    std::fs::copy(cache_file(&home, &other), &file).unwrap();
    assert!(matches!(store(&home).load(&target), Err(format::Rejected::OtherBinary)));
    assert_eq!(outputs(&bin, &home, &[]), without, "a cache of another binary");
    assert_eq!(assert_valid(&home, &bin), entry, "written again for this binary");

    // This binary's ids, but its DWARF changed in place: opened (its DWARF is checked
    // only when DWARF is read), its units not used, and written again.
    let mut moved = foreign.clone();
    moved.dwarf.as_mut().unwrap().info_crc = entry.dwarf.as_ref().unwrap().info_crc.map(|c| c ^ 1);
    // A binary changed in place has another stamp (a file of the same one is not summed).
    moved.stamp = None;
    std::fs::write(&file, format::encode(&binary, &moved)).unwrap();
    assert!(store(&home).load(&target).is_ok_and(|e| e.is_some()));
    assert_eq!(outputs(&bin, &home, &[]), without, "a cache of the same ids, other DWARF");
    assert_eq!(assert_valid(&home, &bin), entry);
}

#[test]
fn a_truncated_or_corrupted_cache_file_is_ignored_and_written_again() {
    let (bin, home, without) = e2e_without_cache("truncated");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let whole = std::fs::read(&file).unwrap();
    let target = Target::open(&bin).unwrap();
    let flip = |at: usize| {
        let mut flipped = whole.clone();
        flipped[at] ^= 0x40;
        flipped
    };
    for (what, bytes) in [
        ("empty", Vec::new()),
        ("the header only", whole[..36].to_vec()),
        ("half", whole[..whole.len() / 2].to_vec()),
        ("all but a byte", whole[..whole.len() - 1].to_vec()),
        ("a byte flipped in the description", flip(40)),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        assert!(store(&home).load(&target).is_err(), "{what}: used");
        assert_eq!(outputs(&bin, &home, &[]), without, "{what}");
        assert_eq!(assert_valid(&home, &bin), entry, "{what}: not written again");
    }
    // A unit's bytes are checked when a question reaches the unit: opened, the units
    // reached read from the binary instead, and the file written again (a byte flipped
    // in each unit: some are only walked past by a lookup the file answers).
    let seed = entry.dwarf.as_ref().unwrap();
    // The blobs follow the header (36 bytes) and the description; the units first.
    let mut at = 36 + u32::from_le_bytes(whole[20..24].try_into().unwrap()) as usize;
    let mut flipped = whole.clone();
    for (_, b) in &seed.bodies {
        flipped[at + 8] ^= 0x40;
        at += b.len();
    }
    std::fs::write(&file, flipped).unwrap();
    let flipped = store(&home).load(&target).unwrap().unwrap().dwarf.unwrap();
    assert!(flipped.read_stored().is_none(), "a unit flipped passes its check");
    assert_eq!(outputs(&bin, &home, &[]), without, "a byte flipped in each unit");
    // Written again with the units the run read from the binary (those it only walked
    // past before are not in it), every one of which passes its check.
    let again = assert_valid(&home, &bin);
    let bodies = |e: &format::Entry| e.dwarf.as_ref().unwrap().bodies.len();
    assert!(bodies(&again) <= bodies(&entry), "{} units, {} before", bodies(&again), bodies(&entry));
    assert_eq!(outputs(&bin, &home, &[]), without, "the file written again");
    // The lookups (the last blob) are checked when DWARF is loaded: opened, asked again,
    // and the file written again.
    let mut again = std::fs::read(&file).unwrap();
    let last = again.len() - 3;
    again[last] ^= 0x40;
    std::fs::write(&file, again).unwrap();
    let flipped = store(&home).load(&target).unwrap().unwrap().dwarf.unwrap();
    assert!(flipped.read_stored().is_none(), "flipped lookups pass their check");
    assert_eq!(outputs(&bin, &home, &[]), without, "a byte flipped in the lookups");
    assert_valid(&home, &bin);
}

/// The cache file `file` rewritten with its description changed by `change` (header,
/// lengths and CRC made to match) and `blobs_len` bytes of blobs claimed, the file's
/// length set to match: past its real blobs, a hole (a sparse file, nothing on disk).
fn forged(file: &Path, change: &dyn Fn(&mut serde_json::Value), blobs_len: u64) {
    let whole = std::fs::read(file).unwrap();
    let json_len = u32::from_le_bytes(whole[20..24].try_into().unwrap()) as usize;
    let mut d: serde_json::Value = serde_json::from_slice(&whole[36..36 + json_len]).unwrap();
    change(&mut d);
    let json = serde_json::to_vec(&d).unwrap();
    let mut out = whole[..16 + 4].to_vec();
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&blobs_len.to_le_bytes());
    out.extend_from_slice(&gtrace::gobin::crc32(&json).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&whole[36 + json_len..]);
    std::fs::write(file, &out).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.set_len(36 + json.len() as u64 + blobs_len).unwrap();
}

/// A sparse file claiming a blob of a TiB (4 KB on disk) is ignored, never read (it
/// aborted every run on its allocation): the output is the output without a cache, and
/// the file is written again.
#[test]
fn a_cache_file_claiming_a_huge_blob_is_ignored() {
    let (bin, home, without) = e2e_without_cache("huge");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let tib = 1u64 << 40;
    forged(&file, &|d| d["dwarf"]["abbrev"] = serde_json::json!([0, tib, 0]), tib);
    assert!(std::fs::metadata(&file).unwrap().len() > tib, "the forged file claims a TiB");
    let target = Target::open(&bin).unwrap();
    assert!(matches!(store(&home).load(&target), Err(format::Rejected::TooLarge { .. })));
    assert_eq!(outputs(&bin, &home, &[]), without, "a file claiming a TiB");
    assert_eq!(assert_valid(&home, &bin), entry, "written again");
}

/// A cache file written by another build of the same gtrace version (the writer names
/// its build by a hash of its sources, build.rs) is not used, and is written again;
/// and the CRC-32 of the compressed `.debug_info` a first run writes is the binary's
/// (computed when the file is written, not when DWARF is loaded).
#[test]
fn a_cache_of_another_build_of_this_version_is_not_used() {
    let (bin, home, without) = e2e_without_cache("other-build");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let crc = gtrace::gobin::crc32(target.dwarf_bytes().expect("DWARF"));
    assert_eq!(entry.dwarf.as_ref().unwrap().info_crc, Some(crc));
    let version = concat!("gtrace ", env!("CARGO_PKG_VERSION"));
    assert!(format::WRITER.starts_with(&format!("{version} build ")), "{}", format::WRITER);
    let file = cache_file(&home, &bin);
    let binary = format::For::new(target.build_ids(), target.file_size());
    let mut foreign = entry.clone();
    foreign.dwarf.as_mut().unwrap().bodies.iter_mut().for_each(|(_, b)| *b = vec![0; b.len()].into());
    for other in [version.to_string(), format!("{version} build 0123456789abcdef")] {
        std::fs::write(&file, format::encode_as(&other, &binary, &foreign)).unwrap();
        assert!(matches!(store(&home).load(&target), Err(format::Rejected::Writer { .. })), "{other}");
        assert_eq!(outputs(&bin, &home, &[]), without, "a cache of {other}");
        assert_eq!(assert_valid(&home, &bin), entry, "{other}: written again by this build");
    }
}

/// A file whose blob area holds more than the blobs its description lists (here a hole
/// of 200 MiB after them, nothing on disk) is not copied as it is when only new inlined
/// sites are written (the hole became 200 MiB of disk blocks): it is written from the
/// blobs it lists, as long as they need.
#[test]
fn a_hole_after_the_blobs_is_not_copied() {
    use std::os::unix::fs::MetadataExt;
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("hole");
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let whole = std::fs::read(&file).unwrap();
    let blobs_len = u64::from_le_bytes(whole[24..32].try_into().unwrap());
    let hole = 200u64 << 20;
    forged(&file, &|_| {}, blobs_len + hole);
    let before = std::fs::metadata(&file).unwrap();
    assert!(before.len() > hole && before.blocks() * 512 < hole, "a sparse file");
    assert!(store(&home).load(&Target::open(&bin).unwrap()).unwrap().is_some(), "the forged file is used");
    let script = "on entry main.small8 { @c = count() }";
    assert_eq!(plan_of(&bin, &home, script, &[]), plan_of(&bin, &home, script, &["--no-cache"]));
    let after = assert_valid(&home, &bin);
    assert!(after.inlined.iter().any(|(p, _)| p == "main.small8"), "{:?}", after.inlined);
    let meta = std::fs::metadata(&file).unwrap();
    assert!(meta.len() < hole && meta.blocks() * 512 < hole, "{} bytes, {} blocks", meta.len(), meta.blocks());
    let json_len = u32::from_le_bytes(std::fs::read(&file).unwrap()[20..24].try_into().unwrap()) as u64;
    let need = after.dwarf.as_ref().unwrap().bodies.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
    assert!(meta.len() >= 36 + json_len + need && meta.len() < 36 + json_len + need + (1 << 20), "{meta:?}");
}

/// A lookup's answer in the cache that is not a DIE of the name asked (two functions'
/// answers swapped, or one pointing inside a DIE, checksums made to match) is not
/// used: the function is looked up again, the output is the output without a cache,
/// and the file is written again with the right answer.
#[test]
fn a_lookup_answer_that_is_not_the_name_asked_is_not_used() {
    let (bin, home, without) = e2e_without_cache("memo");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let binary = format::For::new(target.build_ids(), target.file_size());
    let memo = &entry.dwarf.as_ref().unwrap().memo;
    let answer = |key: &str| memo.iter().find(|(k, _)| k == key).and_then(|(_, v)| *v);
    let add = answer("f main.add").expect("main.add looked up");
    let (other, other_at) = memo
        .iter()
        .find_map(|(k, v)| Some((k.clone(), (*v)?)).filter(|_| k.starts_with("f main.") && k != "f main.add"))
        .expect("another function of main looked up");
    let swapped = |key: &str, v: Option<[u64; 2]>| match key {
        "f main.add" => Some(other_at),
        k if k == other => Some(add),
        _ => v,
    };
    let inside = |key: &str, v: Option<[u64; 2]>| if key == "f main.add" { Some([add[0] + 1, 0]) } else { v };
    for (what, change) in [
        ("swapped", &swapped as &dyn Fn(&str, Option<[u64; 2]>) -> _),
        ("inside a DIE", &inside as &dyn Fn(&str, _) -> _),
    ] {
        let mut forged = entry.clone();
        forged.dwarf.as_mut().unwrap().memo.iter_mut().for_each(|(k, v)| *v = change(k, *v));
        std::fs::write(&file, format::encode(&binary, &forged)).unwrap();
        assert_eq!(outputs(&bin, &home, &[]), without, "{what}");
        let again = assert_valid(&home, &bin);
        let memo = &again.dwarf.as_ref().unwrap().memo;
        let now = |key: &str| memo.iter().find(|(k, _)| k == key).and_then(|(_, v)| *v);
        assert_eq!(now("f main.add"), Some(add), "{what}: not written again");
    }
}

/// A cache file whose DWARF units are bad though their checksums match (forged): the
/// DWARF error is not blamed on the binary; the run compiles again without the cache
/// (and says so in one line), its output is the output without a cache, and the file
/// is written again.
#[test]
fn bad_dwarf_from_the_cache_is_compiled_again_without_it() {
    let (bin, home, without) = e2e_without_cache("bad-units");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let binary = format::For::new(target.build_ids(), target.file_size());
    let mut forged = entry.clone();
    for (_, body) in &mut forged.dwarf.as_mut().unwrap().bodies {
        let mut bytes = body.to_vec();
        bytes.iter_mut().skip(11).step_by(7).for_each(|b| *b = 0xff);
        *body = bytes.into();
    }
    std::fs::write(&file, format::encode(&binary, &forged)).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(said.contains("compiled again without the cache"), "{said}");
    assert_eq!(outputs(&bin, &home, &[]), without, "the file written again");
    assert_valid(&home, &bin);
}

/// A trace keeps its object's large maps in the cache (the next trace of its script
/// makes them ahead, `runtime::premake`); a file whose description is not the object's
/// (forged sizes, with a valid checksum) changes no output, and is written again with
/// the object's own.
#[test]
fn a_traces_large_maps_are_kept_and_a_description_not_its_own_changes_nothing() {
    let test = "a_traces_large_maps_are_kept_and_a_description_not_its_own_changes_nothing";
    if !support::privileged(test) {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("maps");
    let trace = |extra: &[&str]| trace_per_cpu_hash(&bin, &home, extra);
    let without = trace(&["--no-cache"]);
    assert!(without.contains("@b["), "{without}");
    assert_eq!(trace(&[]), without, "the first run");
    let target = Target::open(&bin).unwrap();
    let entry = store(&home).load(&target).unwrap().expect("the cache file");
    let [(key, defs)] = entry.maps.as_slice() else { panic!("{:?}", entry.maps) };
    assert!(defs.iter().any(|d| d.map_type == 5 && d.max_entries >= 1024), "a per-CPU hash: {defs:?}");
    // The maps made ahead from it are the object's: the same output.
    assert_eq!(trace(&[]), without, "with the maps made ahead");
    // Forged: another size, and another type, for this script's key.
    let file = cache_file(&home, &bin);
    let binary = format::For::new(target.build_ids(), target.file_size());
    for forge in [|d: &mut gtrace::object::MapDef| d.max_entries += 1, |d: &mut gtrace::object::MapDef| d.map_type = 1]
    {
        let mut forged = entry.clone();
        forged.maps[0].1.iter_mut().for_each(forge);
        std::fs::write(&file, format::encode(&binary, &forged)).unwrap();
        assert_eq!(trace(&[]), without, "with a description not the object's");
        let again = store(&home).load(&target).unwrap().expect("the cache file");
        assert_eq!(again.maps, [(*key, defs.clone())], "written again with the object's maps");
    }
}

/// The cache file is read as soon as the binary's build ids are, before its symbol
/// table, and its large maps made from then on; the checks that need the binary read
/// come after (inlined sites found in another build's code). A file those checks set
/// aside, whose maps were made ahead at another size, changes no output, and is written
/// again with this run's own maps and sites.
#[test]
fn a_file_set_aside_once_the_binary_is_read_had_its_maps_made_ahead_for_nothing() {
    let test = "a_file_set_aside_once_the_binary_is_read_had_its_maps_made_ahead_for_nothing";
    if !support::privileged(test) {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("maps-set-aside");
    let trace = |extra: &[&str]| trace_per_cpu_hash(&bin, &home, extra);
    let without = trace(&["--no-cache"]);
    assert_eq!(trace(&[]), without, "the first run");
    let target = Target::open(&bin).unwrap();
    let entry = store(&home).load(&target).unwrap().expect("the cache file");
    let [(key, defs)] = entry.maps.as_slice() else { panic!("{:?}", entry.maps) };
    // Its maps another size (made ahead: the early read takes the file), its sites
    // found in another build's code (then the file is not used at all).
    let mut forged = entry.clone();
    forged.maps[0].1.iter_mut().for_each(|d| d.max_entries += 1);
    forged.inlined = vec![("main.nosuch".into(), Vec::new())];
    forged.code_crc = Some(target.code_crc() ^ 1);
    // Another build's code is another file: not this binary's stamp.
    forged.stamp = None;
    let binary = format::For::new(target.build_ids(), target.file_size());
    std::fs::write(cache_file(&home, &bin), format::encode(&binary, &forged)).unwrap();
    assert_eq!(trace(&[]), without, "with a file set aside after its maps were made");
    let again = store(&home).load(&target).unwrap().expect("the cache file");
    assert_eq!(again.maps, [(*key, defs.clone())], "written again with the object's maps");
    assert_eq!((&again.inlined, again.code_crc), (&entry.inlined, entry.code_crc), "this run's sites");
}

/// `@b[b] = count()` on the e2e program's 300 adds, with the cache in `home`: `@b` is a
/// per-CPU hash of the default size, made on a thread, so kept in the cache file.
fn trace_per_cpu_hash(bin: &Path, home: &Path, extra: &[&str]) -> String {
    let command = format!("{} add 300", bin.display());
    let mut args = vec!["-e", "on entry main.add { @b[b] = count() }", "-c", &command, "--budget", "off"];
    args.extend(extra);
    let r = support::gtrace_env(&args, &[("XDG_CACHE_HOME", home.to_str().unwrap())]);
    assert_eq!(r.code, 0, "gtrace {args:?}:\n{}", r.stderr);
    r.stdout
}

/// A file written from a settled binary keeps its stamp; once the binary has changed
/// (here its mode: a new ctime), the file's CRCs are summed again, not taken: a forged
/// `info_crc` then sets its DWARF aside, and the file is written again.
#[test]
fn crcs_kept_for_a_binary_that_changed_since_are_summed_again() {
    let dir = cache_dir("stamp-bin");
    let bin = dir.join("e2e");
    std::fs::copy(support::go_build("e2e", &[]), &bin).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let home = cache_dir("stamp");
    let without = outputs(&bin, &home, &["--no-cache"]);
    assert_eq!(outputs(&bin, &home, &[]), without, "the first run");
    let target = Target::open(&bin).unwrap();
    let entry = store(&home).load(&target).unwrap().expect("the cache file");
    assert!(entry.stamp.is_some() && entry.stamp == target.stamp(), "{:?} {:?}", entry.stamp, target.stamp());
    let mut forged = assert_valid(&home, &bin);
    forged.stamp = entry.stamp;
    forged.dwarf.as_mut().unwrap().bodies.iter_mut().for_each(|(_, b)| *b = vec![0; b.len()].into());
    forged.dwarf.as_mut().unwrap().info_crc = entry.dwarf.as_ref().unwrap().info_crc.map(|c| c ^ 1);
    let binary = format::For::new(target.build_ids(), target.file_size());
    std::fs::write(cache_file(&home, &bin), format::encode(&binary, &forged)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(outputs(&bin, &home, &[]), without, "a binary changed since its file was written");
    let again = store(&home).load(&Target::open(&bin).unwrap()).unwrap().expect("the cache file");
    assert_eq!(again.dwarf.as_ref().unwrap().info_crc, entry.dwarf.as_ref().unwrap().info_crc, "written again");
}

/// A run that learned only inlined sites, maps or the binary's stamp writes them beside
/// the file's DWARF, copied unread. If the file was written again meanwhile (by a gtrace
/// on another build of the same ids and size), that DWARF is not the one the run read,
/// and the run's stamp would vouch for it: nothing is written that way (the run writes
/// the whole file instead), and with the DWARF it read, it is.
#[test]
fn sites_are_not_written_beside_dwarf_other_than_the_run_read() {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("resite");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let read = entry.dwarf.as_ref().unwrap().info_crc;
    assert!(read.is_some(), "a written seed has its CRC");
    let before = std::fs::read(&file).unwrap();
    let other = (entry.stamp, read.map(|c| c ^ 1));
    assert!(!store(&home).save_sites(&target, &entry.inlined, &entry.maps, other).unwrap());
    assert_eq!(std::fs::read(&file).unwrap(), before, "not written beside another DWARF");
    assert!(store(&home).save_sites(&target, &entry.inlined, &entry.maps, (entry.stamp, read)).unwrap());
    assert_eq!(assert_valid(&home, &bin), entry, "written beside the DWARF it read");
}
