//! `breaker check` prints every mistake of a file (issue 17), in file order, and exits 1.
#![cfg(feature = "config")]

use std::process::Command;

#[test]
fn check_prints_every_mistake_and_exits_1() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("breaker-check-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "policies:\n  a:\n    timout: 2s\n    breaker:\n      consecutive_failures: 0\n  \
         b:\n    retry:\n      max_attempts: many\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_breaker"))
        .args(["check", bad.to_str().unwrap()])
        .env("BREAKER__POLICIES__C__TIMEOUT", "1s")
        .output()
        .unwrap();
    let bad = bad.display();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: {bad}:3:5: policies.a.timout: unknown field `timout`, expected one of \
             `breaker`, `retry`, `timeout`, `deadline`, `bulkhead`, `rate`, `hedge`, `adaptive`, `throttle`, `order`, `idempotent`, \
             `max_keys`, `key_idle`, `scope`; did you mean `timeout`?\n\
             error: {bad}:5:29: policies.a.breaker.consecutive_failures: must be at least 1, \
             got 0\n\
             error: {bad}:8:21: policies.b.retry.max_attempts: invalid type: string \"many\", \
             expected u32\n\
             error: {bad}:(env BREAKER__POLICIES__C__TIMEOUT): policies.c.timeout: no policy \
             `c` to override (the file has `a`, `b`); an override changes a policy of the file, \
             it does not add one\n\
             {bad}: 4 errors\n"
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
