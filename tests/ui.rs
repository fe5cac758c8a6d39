//! Compile-time behaviour of `#[circuit_breaker]`: every misuse in `tests/ui/fail` is rejected
//! with the error in its `.stderr` file, and every supported function shape in `tests/ui/pass`
//! compiles. Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui` on
//! the pinned toolchain, and review the diff.

use std::path::Path;

#[test]
fn ui() {
    copy_fixtures();
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

/// trybuild compiles the cases as a crate of its own in `<target>/tests/trybuild/breaker`, so
/// there `CARGO_MANIFEST_DIR` (the base of `config = ".."`) is that directory. Copying
/// `tests/fixtures` there makes `config = "tests/fixtures/breaker.toml"` mean the same file in
/// the ui cases as in the integration tests.
fn copy_fixtures() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is <target>/tmp");
    let to = target.join("tests/trybuild/breaker/tests/fixtures");
    std::fs::create_dir_all(&to).expect("create the trybuild fixtures directory");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for entry in std::fs::read_dir(&from).expect("tests/fixtures") {
        let entry = entry.expect("a fixture");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a fixture");
    }
}
