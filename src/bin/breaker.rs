//! The `breaker` command-line tool.
//!
//! - `breaker check FILE...` validates config files (TOML, YAML or JSON, by extension, with
//!   `BREAKER__...` environment overrides applied), prints each file's effective policies with
//!   every default filled in, in the DSL (as a TOML config that loads to the same policies),
//!   and exits with status 1 listing every error found (`file:line:column: key.path: message`).
//! - `breaker schema` prints the JSON Schema of config files.
//!
//! Exit status: 0 when every file is valid, 1 when any is not, 2 for a usage error.

use breaker_core::config::{self, Loader};
use std::process::ExitCode;

const USAGE: &str =
    "usage: breaker check FILE...   validate config files and print the effective policies
       breaker schema          print the JSON Schema of config files";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("check") if args.len() > 1 => check(&args[1..]),
        Some("schema") if args.len() == 1 => {
            print!("{}", config::json_schema());
            ExitCode::SUCCESS
        }
        Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn check(files: &[String]) -> ExitCode {
    let mut failed = false;
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            println!();
        }
        match Loader::file(file).load() {
            Ok(policies) => {
                let n = policies.len();
                let noun = if n == 1 { "policy" } else { "policies" };
                println!("# {file}: {n} valid {noun}");
                print!("{policies}");
            }
            Err(errors) => {
                failed = true;
                for e in errors.errors() {
                    eprintln!("error: {e}");
                }
                let n = errors.errors().len();
                eprintln!("{file}: {n} error{}", if n == 1 { "" } else { "s" });
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
