//! Cache files and directories not to be used, by where they are: a FIFO in place of a
//! file, a file others may write, a directory not this user's own or under one others
//! may write.

use super::*;

/// The plan gtrace with `XDG_CACHE_HOME=home` compiles for `script`, failing the test if
/// it has not ended within a minute (it is killed).
fn plan_within_a_minute(binary: &Path, home: &Path, script: &str) -> String {
    let plan = home.join(format!("plan-{}-timed.json", std::process::id()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gtrace"))
        .args(["--emit", "plan", "-o", plan.to_str().unwrap(), "-e", script, "-b", binary.to_str().unwrap()])
        .env("XDG_CACHE_HOME", home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("gtrace still running after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::remove_file(&plan).unwrap();
    text
}

/// A FIFO (or a link to one) under the cache file's name is not opened to wait for a
/// writer (it hung every run): the run ends with the plan of a run without a cache, and
/// a cache file is written in its place.
#[test]
fn a_fifo_in_place_of_a_cache_file_is_ignored() {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("fifo");
    let without = plan_of(&bin, &home, SCRIPT, &["--no-cache"]);
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let fifo = home.join("a-fifo");
    for link in [false, true] {
        std::fs::remove_file(&file).unwrap();
        let _ = std::fs::remove_file(&fifo);
        let made = if link { &fifo } else { &file };
        let status = std::process::Command::new("mkfifo").arg(made).status().unwrap();
        assert!(status.success(), "mkfifo {}", made.display());
        if link {
            std::os::unix::fs::symlink(&fifo, &file).unwrap();
        }
        assert_eq!(plan_within_a_minute(&bin, &home, SCRIPT), without, "a FIFO, through a link: {link}");
        assert!(std::fs::symlink_metadata(&file).unwrap().is_file(), "no cache file written over it");
        assert_valid(&home, &bin);
    }
}

/// A cache file another user could write is not trusted (a forged file can pass every
/// checksum): ignored, the output is the output without a cache, and it is written
/// again, for this user only.
#[test]
fn a_cache_file_writable_by_others_is_ignored() {
    use std::os::unix::fs::PermissionsExt;
    let (bin, home, without) = e2e_without_cache("writable-file");
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.join("gtrace")), 0o700, "the cache directory");
    assert_eq!(mode(&file), 0o600, "a cache file");
    let target = Target::open(&bin).unwrap();
    for writable in [0o620, 0o602] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(writable)).unwrap();
        assert!(store(&home).load(&target).unwrap().is_none(), "mode {writable:o}: read");
        assert_eq!(outputs(&bin, &home, &[]), without, "mode {writable:o}");
        assert_eq!(mode(&file), 0o600, "mode {writable:o}: not written again");
        assert_valid(&home, &bin);
    }
}

/// A cache directory that is a symbolic link, or that another user could write, is
/// neither read nor written (nothing evicted from it either), and the run says so in
/// one line with a hint; the output is the output without a cache.
#[test]
fn a_cache_directory_not_this_user_s_own_is_neither_read_nor_written() {
    use std::os::unix::fs::PermissionsExt;
    let (bin, home, without) = e2e_without_cache("untrusted-dir");
    // A cache written where the link will point, and a temporary file two hours old
    // (evicted from a directory in use).
    let elsewhere = cache_dir("untrusted-dir-target");
    outputs(&bin, &elsewhere, &[]);
    let victim = elsewhere.join("gtrace");
    let old = victim.join("left.tmp");
    std::fs::write(&old, "").unwrap();
    let two_hours = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options().write(true).open(&old).unwrap().set_modified(two_hours).unwrap();
    let listing = |d: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        names
    };
    let before = listing(&victim);
    let file = cache_file(&elsewhere, &bin);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&victim, home.join("gtrace")).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert_eq!(outputs(&bin, &home, &[]), without, "a linked cache directory");
    assert!(said.contains("is not used: it is a symbolic link"), "{said}");
    assert_eq!(said.lines().filter(|l| l.contains("cache directory")).count(), 1, "{said}");
    let mut expected = before.clone();
    expected.retain(|n| n != file.file_name().unwrap());
    assert_eq!(listing(&victim), expected, "written or evicted through the link");

    // A directory writable by its group: not used, and the hint says how to fix it.
    std::fs::remove_file(home.join("gtrace")).unwrap();
    std::fs::create_dir(home.join("gtrace")).unwrap();
    std::fs::set_permissions(home.join("gtrace"), std::fs::Permissions::from_mode(0o770)).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(said.contains("writable by group or others") && said.contains("chmod go-w"), "{said}");
    assert!(listing(&home.join("gtrace")).is_empty(), "written into a group-writable directory");
}

/// A cache directory under a directory another user could write (who could rename it
/// away and put theirs in its place) is neither read nor written, said in one line with
/// a hint; under a sticky one (`/tmp`) it is used. The check is made once a run: a
/// directory that passed is not checked again (here: made writable after).
#[test]
fn a_cache_directory_under_a_directory_others_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let (bin, base, without) = e2e_without_cache("untrusted-parent");
    let home = base.join("shared");
    std::fs::create_dir(&home).unwrap();
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let set = |mode: u32| std::fs::set_permissions(&home, std::fs::Permissions::from_mode(mode)).unwrap();
    set(0o777);
    std::fs::remove_file(&file).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    set(0o755);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(said.contains("above it is writable by group or others") && said.contains("chmod go-w"), "{said}");
    assert_eq!(said.lines().filter(|l| l.contains("cache directory")).count(), 1, "{said}");
    assert!(!file.exists(), "written under a parent others may write");
    // Sticky, as /tmp is: others may not rename what is not theirs in it.
    set(0o1777);
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    set(0o755);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(!said.contains("cache directory"), "{said}");
    assert!(file.exists(), "not written under a sticky parent");
    assert_valid(&home, &bin);
    assert_eq!(outputs(&bin, &home, &[]), without);

    // Checked once: a store whose directory passed is not checked again.
    let cache = store(&home);
    assert!(cache.trusted().is_ok());
    set(0o777);
    let again = cache.trusted();
    let fresh = store(&home).trusted();
    set(0o755);
    assert!(again.is_ok(), "checked again: {again:?}");
    assert!(matches!(fresh, Err(gtrace::cache::Untrusted::Parent { .. })), "{fresh:?}");
}
