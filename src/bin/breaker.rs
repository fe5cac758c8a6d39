//! The `breaker` command-line tool (feature `cli`).
//!
//! - `breaker check FILE...` validates config files (TOML, YAML or JSON, by extension, with
//!   `BREAKER__...` environment overrides applied), prints each file's effective policies with
//!   every default filled in, in the DSL (as a TOML config that loads to the same policies),
//!   and exits with status 1 listing every error found (`file:line:column: key.path: message`).
//! - `breaker schema` prints the JSON Schema of config files.
//! - `breaker simulate --trace FILE ...` replays a trace of calls against policies on a
//!   virtual clock with the library's own breaker, and reports what each would have done
//!   (see `breaker simulate --help` and the `breaker_sim` crate).
//! - `breaker trace generate DESCRIPTION` writes a synthetic trace; `breaker trace schema`
//!   prints the JSON Schema of a trace line.
//!
//! Exit status: 0 on success, 1 when a file, a trace or a policy is invalid, 2 for a usage
//! error. A closed standard output (`breaker check FILE | head`) ends the command quietly, as
//! it ends `cat` or `grep`, with status 0; `check` still checks every file and exits with 1
//! when one is invalid.
#![forbid(unsafe_code)]

use breaker_core::config::{self, Loader};
use breaker_sim::plot::{self, Chart};
use breaker_sim::replay::{NamedPolicy, Options};
use breaker_sim::report::{self, Report};
use breaker_sim::sweep::{self, Axis};
use breaker_sim::trace::TraceReader;
use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Check config files, and choose a circuit breaker policy from evidence: replay recorded
/// calls against policies on a virtual clock.
#[derive(Parser)]
#[command(name = "breaker", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate config files and print the effective policies.
    ///
    /// Prints each file's policies with every default filled in, as a TOML config that loads
    /// to the same policies; with errors, lists every one (file:line:column: key.path:
    /// message) and exits with status 1.
    Check {
        /// Config files (.toml, .yaml, .yml or .json); BREAKER__... environment variables
        /// override their values.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
    },
    /// Print the JSON Schema of config files.
    Schema,
    /// Replay a trace of calls against policies and report what each would have done.
    ///
    /// Each trace line is a call arriving at t_ms; the policy's real breaker (on a manual
    /// clock) decides at arrival, and an admitted call's outcome is recorded at
    /// t_ms + latency_ms. Retry, timeout, bulkhead, rate limit, hedging (a hedge's answer is
    /// the next trace line's), adaptive limit, throttling and the layer order are replayed as
    /// in a live pipeline. Per policy it reports: policy, calls, admitted, rejected, reached,
    /// failures_reached, successes_rejected (by the breaker), successes_refused (by any
    /// layer: what a sweep ranks by), opens, half_opens, closes, time_open_ms,
    /// first_open_ms, detect_ms, recover_ms, hedges, p50_ms, p99_ms (and with --json also
    /// succeeded, failed, cancelled; for a sweep params, rank, pareto). The same trace, policies and seed give
    /// byte-identical output.
    Simulate(Simulate),
    /// Write or describe traces.
    #[command(subcommand)]
    Trace(TraceCommand),
}

#[derive(Args)]
struct Simulate {
    /// The trace: JSON Lines (one call per line) or CSV (.csv) with the same columns.
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// A config file whose policies to replay.
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// A policy of --config to replay (repeatable; default: every policy of the file).
    #[arg(long = "policy", value_name = "NAME", requires = "config")]
    policies: Vec<String>,
    /// A breaker policy in the DSL, such as "3 consecutive, open 10s" (repeatable).
    #[arg(long = "breaker", value_name = "DSL")]
    breakers: Vec<String>,
    /// Sweep a config key over values around the one policy given: KEY=VALUES, such as
    /// breaker.consecutive_failures=3..10 (inclusive) or breaker.cooldown=5s,10s,30s
    /// (repeatable: the grid of all combinations, ranked, with its Pareto front).
    #[arg(long = "sweep", value_name = "KEY=VALUES")]
    sweeps: Vec<String>,
    /// Seed of the replay's random draws: the retry jitter and throttling's rejections.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// One JSON object per policy and line instead of the table.
    #[arg(long)]
    json: bool,
    /// Write an SVG chart: per policy its timeline. For a sweep, FILE is the scatter of the
    /// grid with its Pareto front, and FILE with the extension .best.svg the timelines of the
    /// 3 best points. A missing folder is created.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Write an HTML page with the table and the charts. A missing folder is created.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Write a synthetic trace from a description, such as
    /// "healthy 30s, hang 20s timeout 2s, flapping 30s 20%, recovery 30s".
    ///
    /// Phases are separated by commas; each is a kind (healthy, recovery, hang, down,
    /// flapping, slow), a length, and options: N% (share of failures), latency D (typical
    /// answer time), timeout D (for hang, default 2s), rate N/s (calls per second, default
    /// 50/s). Lines are labelled with their phase.
    Generate {
        /// The description.
        description: String,
        /// Seed of the random draws: the same description and seed give the same trace.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where to write it (default: standard output); a .csv file is written as CSV. A
        /// missing folder is created.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Write CSV instead of JSON Lines.
        #[arg(long)]
        csv: bool,
    },
    /// Print the JSON Schema of a trace line.
    Schema,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { files } => check(&files),
        Command::Schema => print(&config::json_schema()).map(|()| ExitCode::SUCCESS),
        Command::Simulate(args) => simulate(args).map(|()| ExitCode::SUCCESS),
        Command::Trace(TraceCommand::Schema) => {
            print(&breaker_sim::trace::json_schema()).map(|()| ExitCode::SUCCESS)
        }
        Command::Trace(TraceCommand::Generate {
            description,
            seed,
            output,
            csv,
        }) => generate(&description, seed, output.as_deref(), csv).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        // The reader stopped reading: nothing left to say, and nobody to say it to.
        Err(Failure::ClosedOutput) => ExitCode::SUCCESS,
        Err(Failure::Message(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a command stopped before its end.
enum Failure {
    /// A message for standard error; the exit status is 1.
    Message(String),
    /// Standard output was closed by its reader (a broken pipe).
    ClosedOutput,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Message(message)
    }
}

impl Failure {
    /// A failed write to standard output: its reader went away, or a real error.
    fn output(e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::ClosedOutput
        } else {
            Failure::Message(format!("standard output: {e}"))
        }
    }
}

/// Writes `text` to standard output (`print!` panics on a closed pipe; this reports it).
fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Failure::output)
}

/// `breaker check`: loads each file with the core loader and prints its effective policies,
/// or every error found.
///
/// Every file is checked even when standard output closes on the way (`| head`): the errors
/// go to standard error, and the exit status is 1 when any file is invalid.
fn check(files: &[String]) -> Result<ExitCode, Failure> {
    let mut failed = false;
    let mut open = true;
    // What goes to standard output, until its reader goes away.
    let mut say = |text: &str| -> Result<(), Failure> {
        if open {
            match print(text) {
                Err(Failure::ClosedOutput) => open = false,
                other => other?,
            }
        }
        Ok(())
    };
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            say("\n")?;
        }
        match Loader::file(file).load() {
            Ok(policies) => {
                let n = policies.len();
                let noun = if n == 1 { "policy" } else { "policies" };
                say(&format!("# {file}: {n} valid {noun}\n{policies}"))?;
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
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The policies named on the command line: those of `--config` (the `--policy` ones, or all),
/// then each `--breaker`.
fn policies(args: &Simulate) -> Result<Vec<NamedPolicy>, String> {
    let mut out = Vec::new();
    if let Some(file) = &args.config {
        let loaded = Loader::file(file).load().map_err(|errors| {
            let lines: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
            format!("{file}: invalid config:\n  {}", lines.join("\n  "))
        })?;
        let names: Vec<String> = if args.policies.is_empty() {
            loaded.names().map(str::to_owned).collect()
        } else {
            args.policies.clone()
        };
        for name in names {
            let policy = loaded.get(&name).ok_or_else(|| {
                format!(
                    "{file}: no policy `{name}`; it has: {}",
                    loaded.names().collect::<Vec<_>>().join(", ")
                )
            })?;
            out.push(NamedPolicy {
                name,
                policy: (*policy).clone(),
                params: Vec::new(),
            });
        }
    }
    for dsl in &args.breakers {
        out.push(
            NamedPolicy::from_breaker_dsl(dsl)
                .map_err(|e| format!("--breaker \"{dsl}\": {}", e.describe()))?,
        );
    }
    if out.is_empty() {
        return Err("no policy to replay: give `--config FILE` or `--breaker DSL`".into());
    }
    Ok(out)
}

fn simulate(args: Simulate) -> Result<(), Failure> {
    let mut policies = policies(&args)?;
    let is_sweep = !args.sweeps.is_empty();
    if is_sweep {
        if policies.len() != 1 {
            let names: Vec<&str> = policies.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "--sweep needs exactly one base policy, got {}{}",
                policies.len(),
                match names.first() {
                    Some(first) if args.config.is_some() => format!(
                        " ({}); choose one with --policy, such as `--policy {first}`",
                        names.join(", ")
                    ),
                    _ => String::new(),
                }
            )
            .into());
        }
        let axes = args
            .sweeps
            .iter()
            .map(|s| s.parse::<Axis>().map_err(|e| format!("--sweep {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        policies = sweep::grid(&policies[0], &axes)?;
    }
    let plots = args.svg.is_some() || args.html.is_some();
    check_outputs(&args, is_sweep)?;
    let options = Options {
        seed: args.seed,
        timeline: plots,
    };
    let mut reader = TraceReader::open(&args.trace).map_err(|e| e.to_string())?;
    let size = std::fs::metadata(&args.trace).map_or(0, |m| m.len());
    let bar = (std::io::stderr().is_terminal() && size > 0).then(|| {
        let bar = indicatif::ProgressBar::new(size);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_message(format!("replaying {} policies", policies.len()));
        bar
    });
    let progress = |bytes: u64| {
        if let Some(b) = &bar {
            b.set_position(bytes);
        }
    };
    let mut reports = breaker_sim::run::run(&mut reader, &policies, options, &progress)
        .map_err(|e| e.to_string())?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if reports.iter().all(|r| r.calls == 0) {
        return Err(format!(
            "{}: the trace has no calls (no line with `attempt` 1); nothing to replay",
            args.trace.display()
        )
        .into());
    }
    if is_sweep {
        sweep::rank(&mut reports);
    }
    let mut out = std::io::stdout().lock();
    let table = report::table(&reports);
    if args.json {
        for r in &reports {
            writeln!(out, "{}", r.to_json()).map_err(Failure::output)?;
        }
    } else {
        out.write_all(table.as_bytes()).map_err(Failure::output)?;
    }
    out.flush().map_err(Failure::output)?;
    drop(out);
    if plots {
        let title = format!("breaker simulate: {}", args.trace.display());
        let mut svgs = Vec::new();
        if is_sweep {
            svgs.push(plot::sweep_svg(
                &format!("{title}: sweep of {} points", reports.len()),
                &reports,
            ));
            let best: Vec<Report> = reports.iter().take(3).cloned().collect();
            svgs.push(plot::timeline_svg(&Chart::from_reports(
                format!("{title}: the 3 best points"),
                &best,
            )));
        } else {
            svgs.push(plot::timeline_svg(&Chart::from_reports(
                title.clone(),
                &reports,
            )));
        }
        if let Some(path) = &args.svg {
            // One file: the first chart; a sweep's timelines go next to it.
            write_file("--svg", path, &svgs[0])?;
            if let Some(second) = svgs.get(1) {
                let other = path.with_extension("best.svg");
                write_file("--svg", &other, second)?;
                eprintln!("charts: {} and {}", path.display(), other.display());
            } else {
                eprintln!("chart: {}", path.display());
            }
        }
        if let Some(path) = &args.html {
            write_file("--html", path, &plot::html_page(&title, &table, &svgs))?;
            eprintln!("page: {}", path.display());
        }
    }
    Ok(())
}

/// Before the replay: the chart and page files are neither the trace nor each other, and their
/// folders exist or are created, so a bad path fails at once rather than after the replay.
fn check_outputs(args: &Simulate, is_sweep: bool) -> Result<(), String> {
    let mut outputs: Vec<(&str, PathBuf)> = Vec::new();
    if let Some(svg) = &args.svg {
        outputs.push(("--svg", svg.clone()));
        if is_sweep {
            outputs.push(("--svg", svg.with_extension("best.svg")));
        }
    }
    if let Some(html) = &args.html {
        outputs.push(("--html", html.clone()));
    }
    let same = |a: &Path, b: &Path| {
        a == b
            || matches!(
                (std::fs::canonicalize(a), std::fs::canonicalize(b)),
                (Ok(x), Ok(y)) if x == y
            )
    };
    for (i, (flag, path)) in outputs.iter().enumerate() {
        if same(path, &args.trace) {
            return Err(format!(
                "{flag} {}: is the trace; choose another file for the output",
                path.display()
            ));
        }
        if let Some((other, _)) = outputs[..i].iter().find(|(_, p)| same(p, path)) {
            return Err(format!(
                "{flag} {}: {other} writes the same file; choose two files",
                path.display()
            ));
        }
        create_folder(flag, path)?;
    }
    Ok(())
}

/// Writes `text` to the file of option `flag` (its folder was made by [`check_outputs`]).
fn write_file(flag: &str, path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{flag} {}: cannot write: {e}", path.display()))
}

/// Creates the folder of the file of option `flag` when it is missing; an error names the
/// option, the file and which part of its path is in the way.
fn create_folder(flag: &str, path: &Path) -> Result<(), String> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    std::fs::create_dir_all(dir).map_err(|e| {
        // `create_dir_all` says only "File exists" when a part of the path is a file.
        let file = dir
            .ancestors()
            .find(|a| a.exists() && !a.is_dir())
            .map(|a| format!(": `{}` is not a folder", a.display()));
        format!(
            "{flag} {}: cannot create its folder{}",
            path.display(),
            file.unwrap_or_else(|| format!(" `{}`: {e}", dir.display()))
        )
    })
}

fn generate(description: &str, seed: u64, output: Option<&Path>, csv: bool) -> Result<(), Failure> {
    let scenario: breaker_sim::generate::Scenario =
        description.parse().map_err(|e| format!("{e}"))?;
    match output {
        None => {
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            breaker_sim::generate::write(&scenario, seed, out, csv).map_err(Failure::output)?;
        }
        Some(path) => {
            let csv = csv
                || breaker_sim::trace::Format::from_path(path) == breaker_sim::trace::Format::Csv;
            create_folder("--output", path)?;
            let file = std::fs::File::create(path)
                .map_err(|e| format!("--output {}: cannot write: {e}", path.display()))?;
            let n =
                breaker_sim::generate::write(&scenario, seed, std::io::BufWriter::new(file), csv)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("{}: {n} calls", path.display());
        }
    }
    Ok(())
}
