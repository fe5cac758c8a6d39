//! Compile-time behaviour of `#[circuit_breaker]`: every misuse in `tests/ui/fail` is rejected
//! with the error in its `.stderr` file, and every supported function shape in `tests/ui/pass`
//! compiles and runs. Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test
//! ui` on the pinned toolchain, and review the diff. `BREAKER_UI=receivers,alias` runs only the
//! cases whose file name contains `receivers` or `alias` (the whole run takes minutes).
//!
//! The pass cases are also the modules of the crate `tests/ui` (`clippy.rs`), which CI lints with
//! clippy's pedantic lints denied: [`clippy_crate_lists_every_pass_case`] keeps the two lists
//! equal.

use std::path::Path;

#[test]
fn ui() {
    copy_fixtures();
    let t = trybuild::TestCases::new();
    match std::env::var("BREAKER_UI") {
        Ok(only) => {
            for dir in ["fail", "pass"] {
                let selected =
                    |c: &String| only.split(',').any(|o| format!("{dir}/{c}").contains(o));
                for case in cases(dir).filter(selected) {
                    let path = format!("tests/ui/{dir}/{case}.rs");
                    if dir == "fail" {
                        t.compile_fail(path);
                    } else {
                        t.pass(path);
                    }
                }
            }
        }
        Err(_) => {
            t.compile_fail("tests/ui/fail/*.rs");
            t.pass("tests/ui/pass/*.rs");
        }
    }
}

/// The names (without `.rs`) of the cases in `tests/ui/{dir}`.
fn cases(dir: &str) -> impl Iterator<Item = String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ui")
        .join(dir);
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the ui cases")
        .filter_map(|e| {
            let name = e.expect("a ui case").file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    names.sort();
    names.into_iter()
}

/// Every pass case is a module of `tests/ui/clippy.rs`, so clippy lints it.
#[test]
fn clippy_crate_lists_every_pass_case() {
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/clippy.rs");
    let main = std::fs::read_to_string(main).expect("tests/ui/clippy.rs");
    let missing: Vec<String> = cases("pass")
        .filter(|case| {
            !main.contains(&format!("#[path = \"pass/{case}.rs\"]"))
                || !main.contains(&format!("{case}_case::main();"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "add these pass cases to tests/ui/clippy.rs: {missing:?}"
    );
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
