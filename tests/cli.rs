//! The `breaker` command-line tool: `check` and `schema`.
#![cfg(feature = "config")]

use std::process::Command;

/// A new directory for a test's files, under the target's temporary directory (not the
/// system's, which a clean-up could empty mid-run), named after the test and this process.
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn breaker(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_breaker"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("BREAKER__POLICIES__INVENTORY__RETRY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn check_prints_effective_policies_of_a_valid_file() {
    let (code, stdout, stderr) = breaker(&["check", "examples/breaker.yaml"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(stdout.starts_with(
        "# examples/breaker.yaml: 3 valid policies\n[policies.inventory]\n\
         breaker = \"50% of 100 calls min 20, open 30s factor 2 max 5m, probes 1, close after 1\"\n"
    ));
}

#[test]
fn check_lists_every_error_and_fails() {
    let dir = scratch_dir("breaker-cli");
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[policies.a.breaker]\nconsecutive_failures = 0\nhalf_open_probes = 0\n\
         [policies.b]\ntimeout = \"5s\"\ndeadline = \"1s\"\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let (code, stdout, stderr) = breaker(&["check", bad]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "error: {bad}:2:24: policies.a.breaker.consecutive_failures: must be at least 1, got 0\n\
             error: {bad}:3:20: policies.a.breaker.half_open_probes: must be in 1..=65535, got 0\n\
             error: {bad}:5:11: policies.b.timeout: attempt timeout (5s) must be <= deadline (1s)\n\
             {bad}: 3 errors\n"
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An invalid value of `default` fails `check` even when no policy inherits it, and is
/// reported once however many policies do.
#[test]
fn check_fails_for_an_invalid_default_and_reports_it_once() {
    let dir = scratch_dir("breaker-cli-default");
    for (name, policies) in [
        ("none.toml", ""),
        ("two.toml", "[policies.a]\n[policies.b]\n"),
    ] {
        let bad = dir.join(name);
        std::fs::write(
            &bad,
            format!("[default.breaker]\ncooldown = \"0s\"\n{policies}"),
        )
        .unwrap();
        let bad = bad.to_str().unwrap();
        let (code, stdout, stderr) = breaker(&["check", bad]);
        assert_eq!((code, stdout.as_str()), (1, ""), "{name}");
        assert_eq!(
            stderr,
            format!(
                "error: {bad}:2:12: default.breaker.cooldown: must be non-zero, got 0s (a breaker \
                 that never stays open protects nothing)\n{bad}: 1 error\n"
            )
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn schema_prints_the_committed_schema_and_usage_errors_exit_2() {
    let (code, stdout, _) = breaker(&["schema"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        std::fs::read_to_string("examples/breaker.schema.json").unwrap()
    );
    assert_eq!(breaker(&[]).0, 2);
    assert_eq!(breaker(&["check"]).0, 2);
}

/// `breaker check FILE | head` and the like: a reader that stops reading ends the command
/// quietly (it panicked with exit status 101 on the broken pipe). The pipe's read end is closed
/// before the command starts, so its first write fails, whatever the scheduling.
#[test]
fn a_closed_standard_output_ends_each_command_quietly() {
    let trace = scratch_dir("closed_output").join("trace.jsonl");
    let trace = trace.to_str().unwrap();
    let (code, _, stderr) = breaker(&[
        "trace",
        "generate",
        "healthy 5s",
        "--seed",
        "1",
        "-o",
        trace,
    ]);
    assert_eq!(code, 0, "{stderr}");
    for args in [
        &["check", "examples/breaker.yaml", "examples/breaker.toml"][..],
        &["schema"],
        &["trace", "schema"],
        &["trace", "generate", "healthy 5s", "--seed", "1"],
        &[
            "simulate",
            "--trace",
            trace,
            "--breaker",
            "3 consecutive, open 1s",
        ],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_breaker"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            (out.status.code(), stderr.as_str()),
            (Some(0), ""),
            "{args:?}"
        );
    }
    // `check` goes on checking after its output closed: a bad file after a good one is still
    // reported on standard error, and still fails the check.
    let bad = scratch_dir("closed_output_check").join("bad.toml");
    std::fs::write(&bad, "[policies.a.breaker]\ncooldown = \"0s\"\n").unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_breaker"))
        .args(["check", "examples/breaker.yaml", bad.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.ends_with("bad.toml: 1 error\n"), "{stderr}");
}
