//! The README's `breaker-admin` example is the crate docs' example (a doc test, compiled by
//! `cargo test`), line for line: this keeps the two the same.

#[test]
fn the_readme_example_is_the_crate_docs_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let section = readme
        .split("## Seeing and steering breakers at run time")
        .nth(1)
        .expect("the README's section");
    let block: Vec<&str> = section
        .split("```rust\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap()
        .lines()
        .collect();
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let doc: Vec<&str> = lib
        .split("//! ```no_run\n")
        .nth(1)
        .unwrap()
        .split("//! ```")
        .next()
        .unwrap()
        .lines()
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
        })
        .filter(|l| !l.starts_with("# "))
        .collect();
    assert_eq!(block, doc);
}
