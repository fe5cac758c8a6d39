//! The `breaker` command line's simulator: `simulate`, `trace generate`, `trace schema`, and
//! `--help` for every subcommand.

use std::path::PathBuf;
use std::process::Command;

fn breaker(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_breaker"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `breaker simulate --trace TRACE --breaker "3 consecutive"` with `extra` options.
fn simulate(trace: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["simulate", "--trace", trace, "--breaker", "3 consecutive"];
    args.extend_from_slice(extra);
    breaker(&args)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("breaker-cli-sim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_subcommand_has_help() {
    for (args, mentions) in [
        (&["--help"][..], "simulate"),
        (&["check", "--help"][..], "FILE"),
        (&["schema", "--help"][..], "JSON Schema"),
        (&["simulate", "--help"][..], "--sweep"),
        (&["trace", "--help"][..], "generate"),
        (&["trace", "generate", "--help"][..], "--seed"),
        (&["trace", "schema", "--help"][..], "trace line"),
    ] {
        let (code, stdout, _) = breaker(args);
        assert_eq!(code, 0, "{args:?}");
        assert!(stdout.contains(mentions), "{args:?}: {stdout}");
    }
}

const SCENARIO: &str = "healthy 5s, hang 5s timeout 2s, flapping 5s 20%, recovery 5s";

#[test]
fn generate_and_simulate_give_byte_identical_output_twice() {
    let dir = temp_dir("determinism");
    let trace = dir.join("trace.jsonl");
    let trace = trace.to_str().unwrap();
    let (code, stdout, stderr) =
        breaker(&["trace", "generate", SCENARIO, "--seed", "7", "-o", trace]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    let first_trace = std::fs::read_to_string(trace).unwrap();
    let (_, again, _) = breaker(&["trace", "generate", SCENARIO, "--seed", "7"]);
    assert_eq!(
        again, first_trace,
        "stdout and file output are the same trace"
    );
    assert_ne!(
        breaker(&["trace", "generate", SCENARIO, "--seed", "8"]).1,
        first_trace
    );

    let run = |extra: &[&str]| {
        let svg = dir.join("chart.svg");
        let mut args = vec![
            "simulate",
            "--trace",
            trace,
            "--breaker",
            "3 consecutive, open 2s",
            "--breaker",
            "50% of 20 calls min 10, open 1s",
            "--config",
            "examples/breaker.toml",
            "--svg",
            svg.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = breaker(&args);
        assert_eq!(code, 0, "{stderr}");
        (stdout, std::fs::read_to_string(&svg).unwrap())
    };
    let (table, svg) = run(&[]);
    assert_eq!(run(&[]), (table.clone(), svg.clone()));
    assert!(table.starts_with("policy "), "{table}");
    assert!(svg.starts_with("<svg"), "{svg}");
    let (json, _) = run(&["--json"]);
    assert_eq!(run(&["--json"]).0, json);
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The config's policies first (all of them: none named), then the DSL ones.
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names[names.len() - 2..],
        ["3 consecutive, open 2s", "50% of 20 calls min 10, open 1s"]
    );
    // The documented fields, in the documented order.
    let first = json.lines().next().unwrap();
    let fields = [
        "policy",
        "calls",
        "admitted",
        "rejected",
        "reached",
        "failures_reached",
        "successes_rejected",
        "successes_refused",
        "opens",
        "half_opens",
        "closes",
        "time_open_ms",
        "first_open_ms",
        "detect_ms",
        "recover_ms",
        "succeeded",
        "failed",
        "cancelled",
        "hedges",
        "p50_ms",
        "p99_ms",
    ];
    let at: Vec<usize> = fields
        .iter()
        .map(|f| {
            first
                .find(&format!("\"{f}\":"))
                .unwrap_or_else(|| panic!("{f}: {first}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{first}");
    assert_eq!(lines[0].as_object().unwrap().len(), fields.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `examples/slow-tail.jsonl` (a call every 10 ms, 5 ms each but every 20th, from the 8th,
/// 300 ms: 10 of 200) through `examples/hedging.toml`, by hand:
/// - `plain`: 200 attempts; the p99 (the 198th of 200 latencies, nearest rank) is 300 ms.
/// - `fixed` (`after 20ms`): each slow call hedges 20 ms after it arrives; the hedge's answer
///   is the line arriving then (5 ms), so the call takes 25 ms: 10 hedges, 210 attempts, p99
///   25 ms.
/// - `p90` (`after p90 in 10ms..100ms`): until 64 attempts have answered the delay is the
///   range's maximum, 100 ms: the slow calls at 70, 270 and 470 ms take 105 ms. The 64th
///   answer (the call at 630 ms, at 635 ms) sets the 90th percentile of the answers so far,
///   5 ms, clamped to 10 ms: the 7 slow calls from 670 ms take 15 ms. p99 (the 198th of 5 ms
///   ×190, 15 ms ×7, 105 ms ×3) is 105 ms.
#[test]
fn simulate_compares_hedging_on_and_off_on_one_trace() {
    let (code, stdout, stderr) = breaker(&[
        "simulate",
        "--trace",
        "examples/slow-tail.jsonl",
        "--config",
        "examples/hedging.toml",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = |name: &str| {
        let r = rows
            .iter()
            .find(|r| r["policy"] == name)
            .unwrap_or_else(|| panic!("{name}: {stdout}"));
        (
            r["calls"].as_u64().unwrap(),
            r["reached"].as_u64().unwrap(),
            r["hedges"].as_u64().unwrap(),
            r["p50_ms"].as_f64().unwrap(),
            r["p99_ms"].as_f64().unwrap(),
        )
    };
    assert_eq!(row("plain"), (200, 200, 0, 5.0, 300.0));
    assert_eq!(row("fixed"), (200, 210, 10, 5.0, 25.0));
    assert_eq!(row("p90"), (200, 210, 10, 5.0, 105.0));
    // The table has the same columns.
    let (_, table, _) = breaker(&[
        "simulate",
        "--trace",
        "examples/slow-tail.jsonl",
        "--config",
        "examples/hedging.toml",
        "--policy",
        "fixed",
    ]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header[header.len() - 3..], ["hedges", "p50_ms", "p99_ms"]);
    let fixed: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(fixed[fixed.len() - 3..], ["10", "5", "25"], "{table}");
}

/// A user's report: on a healthy trace a tight rate limit refuses most calls, every one of
/// which would have succeeded; a sweep ranked by the breaker's refusals alone put it on the
/// Pareto front at no cost. Ranked by `successes_refused` (any layer's), it comes last.
#[test]
fn a_sweep_of_rate_limits_costs_the_good_calls_they_shed() {
    let dir = temp_dir("sweep-rate");
    let trace = dir.join("healthy.jsonl");
    let trace = trace.to_str().unwrap();
    let generated = breaker(&[
        "trace",
        "generate",
        "healthy 10s",
        "--seed",
        "1",
        "-o",
        trace,
    ]);
    assert_eq!(generated.0, 0, "{}", generated.2);
    let (code, stdout, stderr) = breaker(&[
        "simulate",
        "--trace",
        trace,
        "--breaker",
        "5 consecutive, open 5s",
        "--sweep",
        "rate=10/s burst 1,1000/s",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let points: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let n = |p: &serde_json::Value, k: &str| p[k].as_u64().unwrap();
    let [loose, tight] = <[serde_json::Value; 2]>::try_from(points).unwrap();
    assert_eq!(loose["params"][0][1], "1000/s", "{loose}");
    assert_eq!(tight["params"][0][1], "10/s burst 1", "{tight}");
    // A healthy trace: every call refused would have succeeded, and no breaker refused any.
    assert!(n(&tight, "rejected") > n(&tight, "calls") / 2, "{tight}");
    assert_eq!(n(&tight, "successes_refused"), n(&tight, "rejected"));
    assert_eq!(n(&tight, "successes_rejected"), 0);
    assert_eq!(
        (n(&loose, "rejected"), n(&loose, "successes_refused")),
        (0, 0)
    );
    assert_eq!(
        (n(&loose, "rank"), loose["pareto"].as_bool()),
        (1, Some(true))
    );
    assert_eq!(
        (n(&tight, "rank"), tight["pareto"].as_bool()),
        (2, Some(false))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_is_ranked_with_its_pareto_front() {
    let dir = temp_dir("sweep");
    let trace = dir.join("trace.csv");
    let trace = trace.to_str().unwrap();
    assert_eq!(breaker(&["trace", "generate", SCENARIO, "-o", trace]).0, 0);
    assert!(std::fs::read_to_string(trace)
        .unwrap()
        .starts_with("t_ms,latency_ms,outcome,"));
    let (code, stdout, stderr) = breaker(&[
        "simulate",
        "--trace",
        trace,
        "--breaker",
        "5 consecutive, open 5s",
        "--sweep",
        "breaker.consecutive_failures=2..4",
        "--sweep",
        "breaker.cooldown=1s,5s",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let points: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(points.len(), 6);
    let ranks: Vec<u64> = points.iter().map(|p| p["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, [1, 2, 3, 4, 5, 6]);
    let cost = |p: &serde_json::Value| {
        p["failures_reached"].as_u64().unwrap() + p["successes_refused"].as_u64().unwrap()
    };
    assert!(points.windows(2).all(|w| cost(&w[0]) <= cost(&w[1])));
    // The best point is never beaten on both counts: it is on the front.
    assert_eq!(points[0]["pareto"], true);
    assert_eq!(points[0]["params"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_1_naming_the_line_and_usage_errors_exit_2() {
    let dir = temp_dir("bad");
    let trace = dir.join("bad.jsonl");
    std::fs::write(
        &trace,
        "{\"t_ms\": 0, \"latency_ms\": 1, \"outcome\": \"success\"}\n{\"t_ms\": 1, \"latency_ms\": 1, \"outcome\": \"yes\"}\n",
    )
    .unwrap();
    let trace = trace.to_str().unwrap();
    let (code, stdout, stderr) =
        breaker(&["simulate", "--trace", trace, "--breaker", "3 consecutive"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert!(
        stderr.starts_with(&format!("error: {trace}:2: unknown `outcome` `yes`")),
        "{stderr}"
    );
    let (code, _, stderr) = breaker(&["simulate", "--trace", trace, "--breaker", "3 consecutiv"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--breaker \"3 consecutiv\""), "{stderr}");
    let (code, _, stderr) = breaker(&["trace", "generate", "healthy 5s, hang"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("`hang`: the phase has no length"),
        "{stderr}"
    );
    let (code, _, stderr) = breaker(&[
        "simulate",
        "--trace",
        trace,
        "--config",
        "examples/compare.toml",
        "--sweep",
        "breaker.cooldown=1s,2s",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: --sweep needs exactly one base policy, got 3 (demo, patient, sensitive); choose \
         one with --policy, such as `--policy demo`\n"
    );
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.to_str().unwrap();
    let (code, stdout, stderr) =
        breaker(&["simulate", "--trace", empty, "--breaker", "3 consecutive"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!("error: {empty}: the trace has no calls (no line with `attempt` 1); nothing to replay\n")
    );
    assert_eq!(breaker(&["simulate"]).0, 2);
    assert_eq!(
        breaker(&["simulate", "--trace", trace, "--policy", "x"]).0,
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An output file whose folder cannot be made is an error naming the option, the file and
/// the part of its path in the way; a missing folder is created.
#[test]
fn an_output_path_through_a_file_names_the_option_and_the_file() {
    let dir = temp_dir("out");
    let trace = dir.join("t.jsonl");
    let trace = trace.to_str().unwrap();
    assert_eq!(
        breaker(&["trace", "generate", "healthy 1s", "-o", trace]).0,
        0
    );
    let blocked = format!("{trace}/chart.svg");
    let (code, _, stderr) = simulate(trace, &["--svg", &blocked]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!("error: --svg {blocked}: cannot create its folder: `{trace}` is not a folder\n")
    );
    let (code, _, stderr) = breaker(&[
        "trace",
        "generate",
        "healthy 1s",
        "-o",
        &format!("{trace}/x.jsonl"),
    ]);
    assert_eq!(code, 1);
    assert!(
        stderr.starts_with(&format!(
            "error: --output {trace}/x.jsonl: cannot create its folder: `{trace}` is not a folder"
        )),
        "{stderr}"
    );
    // An output that is the trace, or two outputs on one file, are refused before the replay.
    let (code, _, stderr) = simulate(trace, &["--svg", trace]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!("error: --svg {trace}: is the trace; choose another file for the output\n")
    );
    let both = dir.join("both").to_str().unwrap().to_owned();
    let (code, _, stderr) = simulate(trace, &["--svg", &both, "--html", &both]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!("error: --html {both}: --svg writes the same file; choose two files\n")
    );
    assert!(!std::path::Path::new(&both).exists());
    let nested = dir.join("new").join("page.html");
    let (code, _, _) = simulate(trace, &["--html", nested.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(std::fs::read_to_string(&nested).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_schema_prints_the_committed_schema() {
    let (code, stdout, _) = breaker(&["trace", "schema"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        std::fs::read_to_string("breaker-sim/trace.schema.json").unwrap()
    );
}
