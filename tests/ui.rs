//! Compile-time behaviour of `#[circuit_breaker]`: every misuse in `tests/ui/fail` is rejected
//! with the error in its `.stderr` file, and every supported function shape in `tests/ui/pass`
//! compiles. Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui` on
//! the pinned toolchain, and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
