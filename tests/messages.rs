//! The messages of problems outside the script, as a user sees them (stderr), snapshot
//! with insta: processes that cannot be traced, commands that cannot run, files that are
//! not Go executables, text that is not UTF-8, `-l` finding nothing. Each says what the
//! thing is and what to do. Paths that vary are replaced by placeholders.

mod support;

use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("messages");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// gtrace's stderr for `args`, which must fail (exit 1, no panic), with `replace`d text.
fn message(args: &[&str], replace: &[(&str, &str)]) -> String {
    let r = support::gtrace(args);
    assert_eq!(r.code, 1, "{args:?} should fail:\n{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let mut text = r.stderr;
    for (from, to) in replace {
        text = text.replace(from, to);
    }
    text
}

#[test]
fn a_kernel_thread_is_not_traceable() {
    // pid 2 is kthreadd on every Linux.
    insta::assert_snapshot!(message(&["-e", "on begin { }", "--check", "-p", "2"], &[]));
}

#[test]
fn a_zombie_is_not_traceable() {
    // A child that has exited and is not yet collected is a zombie.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id().to_string();
    while !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap().contains(") Z") {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let text = message(&["-e", "on begin { }", "--check", "-p", &pid], &[(&pid, "PID")]);
    child.wait().unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn a_command_that_is_a_directory_or_not_executable() {
    let dir = scratch("");
    let d = dir.to_str().unwrap();
    insta::assert_snapshot!("directory", message(&["-e", "on begin { }", "--check", "-c", d], &[(d, "DIR")]));
    let file = scratch("data.txt");
    std::fs::write(&file, "not a program").unwrap();
    let f = file.to_str().unwrap();
    insta::assert_snapshot!("not_executable", message(&["-e", "on begin { }", "--check", "-c", f], &[(f, "FILE")]));
}

#[test]
fn a_script_wrapper_points_at_the_go_program() {
    let wrapper = scratch("run-server.sh");
    std::fs::write(&wrapper, "#!/bin/sh\nexec ./server --port 8080 \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let w = wrapper.to_str().unwrap();
    insta::assert_snapshot!("with_c", message(&["-e", "on begin { }", "--check", "-c", w], &[(w, "WRAPPER")]));
    insta::assert_snapshot!("with_b", message(&["-e", "on begin { }", "--check", "-b", w], &[(w, "WRAPPER")]));
}

#[test]
fn a_truncated_go_binary_says_truncated() {
    let bin = support::go_build("e2e", &[]);
    let data = std::fs::read(&bin).unwrap();
    let cut = scratch("truncated");
    std::fs::write(&cut, &data[..data.len() / 3]).unwrap();
    let c = cut.to_str().unwrap();
    let text = message(&["-e", "on begin { }", "--check", "-b", c], &[(c, "BIN")]);
    // The sizes depend on the build: the file's third, and what its headers describe.
    assert!(text.contains(&format!("it has {} bytes", data.len() / 3)), "{text}");
    assert!(text.contains(&format!("describe {}", data.len())), "{text}");
    let text = text.replace(&(data.len() / 3).to_string(), "N").replace(&data.len().to_string(), "M");
    insta::assert_snapshot!(text);
}

#[test]
fn invalid_utf8_in_a_script_is_placed() {
    let bin = support::go_build("e2e", &[]);
    let script = scratch("bad.gt");
    std::fs::write(&script, b"on begin {\n    printf(\"caf\xe9\\n\")\n}\n").unwrap();
    let s = script.to_str().unwrap();
    let b = bin.to_str().unwrap();
    insta::assert_snapshot!(message(&[s, "--check", "-b", b], &[(s, "SCRIPT")]));
}

#[test]
fn list_matching_nothing_names_the_closest() {
    let bin = support::go_build("e2e", &[]);
    let b = bin.to_str().unwrap();
    insta::assert_snapshot!(message(&["-l", "main.ad", "-b", b], &[(b, "BIN")]));
}

/// `-l` takes a name quoted as a script quotes it, as the name inside the quotes.
#[test]
fn list_takes_a_quoted_name_as_scripts_write_it() {
    let bin = support::go_build("e2e", &[]);
    let b = bin.to_str().unwrap();
    let quoted = support::gtrace(&["-l", "\"main.add\"", "-b", b]);
    let plain = support::gtrace(&["-l", "main.add", "-b", b]);
    assert_eq!(quoted.code, 0, "{}", quoted.stderr);
    assert!(quoted.stdout.starts_with("main.add("), "{}", quoted.stdout);
    assert_eq!(quoted.stdout, plain.stdout);
}

#[test]
fn a_syntax_error_is_said_before_the_target_is_opened() {
    // /bin/true is no Go executable: the script's own error comes first all the same.
    let text = message(&["-e", "on entry {", "-b", "/bin/true"], &[]);
    assert!(text.contains("expected a function name or a string"), "{text}");
    assert!(!text.contains("Go executable"), "{text}");
    // --emit ast needs no Go target either: the script is all it prints.
    let r = support::gtrace(&["-e", "on entry main.F { @c = count() }", "--emit", "ast", "-b", "/bin/true"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"Probe\""), "{}", r.stdout);
}
