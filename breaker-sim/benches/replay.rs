//! Replay speed, as a bench binary that prints its figures:
//!
//! ```text
//! cargo bench -p breaker-sim --bench replay            # both figures
//! cargo bench -p breaker-sim --bench replay -- quick   # a smaller sweep (10 policies)
//! ```
//!
//! 1. Simulated calls per second on one core, for a breaker with a consecutive rule, over a
//!    1,000,000-call trace in memory (target: at least 5 M/s/core).
//! 2. A 1,000,000-call trace file (JSON Lines, written first) replayed against a sweep of
//!    100 policies, end to end: reading, parsing and all policies on all cores (target:
//!    under a minute on the 2-core machine). Memory stays flat: the file is streamed.

use breaker_sim::generate::{Generator, Scenario};
use breaker_sim::replay::{NamedPolicy, Options, Sim};
use breaker_sim::sweep::{self, Axis};
use breaker_sim::trace::{Call, TraceReader};
use std::time::Instant;

const SCENARIO: &str = "healthy 2m rate 2200/s, hang 1m rate 2200/s timeout 2s, \
                        flapping 2m rate 2200/s 20%, down 1m rate 2200/s, recovery 2m rate 2200/s";

fn scenario() -> Scenario {
    SCENARIO.parse().expect("a valid scenario")
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let calls: Vec<Call> = Generator::new(&scenario(), 1).take(1_000_000).collect();
    assert_eq!(calls.len(), 1_000_000);

    // 1. One policy, one core.
    let policy = NamedPolicy::from_breaker_dsl("5 consecutive, open 1s").unwrap();
    let mut best = f64::MAX;
    let mut opens = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let mut sim = Sim::new(&policy, Options::default()).unwrap();
        sim.feed(&calls);
        let report = sim.finish(&[]);
        best = best.min(start.elapsed().as_secs_f64());
        opens = report.opens;
    }
    println!(
        "replay, consecutive rule, 1 core: {:.1} M simulated calls/s ({:.1} ns/call, best of 5; \
         {opens} openings)",
        calls.len() as f64 / best / 1e6,
        best * 1e9 / calls.len() as f64
    );

    // 2. A 1,000,000-call file against a 100-policy sweep.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("breaker-sim-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");
    {
        let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut w = breaker_sim::trace::TraceWriter::json_lines(file);
        let phases = Generator::new(&scenario(), 1).phases().to_vec();
        for c in &calls {
            w.write(c, &phases).unwrap();
        }
        w.finish().unwrap();
    }
    drop(calls);
    let axes: Vec<Axis> = if quick {
        vec!["breaker.consecutive_failures=1..10".parse().unwrap()]
    } else {
        vec![
            "breaker.consecutive_failures=1..10".parse().unwrap(),
            "breaker.cooldown=1s..10s:1s".parse().unwrap(),
        ]
    };
    let base = NamedPolicy::from_breaker_dsl("5 consecutive, open 5s").unwrap();
    let grid = sweep::grid(&base, &axes).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    let start = Instant::now();
    let mut reader = TraceReader::open(&path).unwrap();
    let reports = breaker_sim::run::run(&mut reader, &grid, Options::default(), &|_| {}).unwrap();
    let took = start.elapsed().as_secs_f64();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "sweep: 1,000,000-call trace ({:.0} MB of JSON Lines) x {} policies on {threads} cores: \
         {took:.1} s ({:.1} M simulated calls/s in all)",
        size as f64 / 1e6,
        reports.len(),
        1e6 * reports.len() as f64 / took / 1e6
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
