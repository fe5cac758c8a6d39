//! The fleet through store faults, with the real parts: a real `redis-server` killed,
//! flushed, hung, re-keyed, failed over, evicted and partitioned, and the real
//! `CircuitBreaker` called through `try_acquire`, a `Pipeline`, a config file's
//! `scope = "shared"` and `#[circuit_breaker(scope = "shared")]`, by 3 replicas in one process
//! (one store connection and replica id each) and by 3 replica processes.
//!
//! Every fault runs the same scenario ([`scenario`]): the fault hits an open fleet; the
//! tests assert that no call fails because of the store (`on_error = local`, a healthy
//! dependency), that the probe cap holds outside the documented store-loss bound, and that
//! once the fault ends every replica decides with the fleet again and every rule works (the
//! consecutive rule, the fleet failure rate over a time window, and `quorum(2)`).
//!
//! `measure_every_fault` (ignored: `cargo test -p breaker-redis --test store_faults --
//! --ignored measure --nocapture --test-threads 1`) runs every fault in both topologies one
//! after another and prints the README's table.
//!
//! Without `redis-server` on `PATH` every test prints a notice and passes, unless
//! `REQUIRE_REDIS=1` (CI sets it).
//!
//! # Files
//! - `dependency.rs`: the dependency the replicas call, which counts what the tests measure;
//! - `replica.rs`: one replica (its store, breakers and callers), in this process or another;
//! - `fleet.rs`: the fleet in one process or in replica processes (this binary run again);
//! - `fault.rs`: the faults, done to real servers and through the proxy;
//! - `scenario.rs`: the scenario, its figures and its expectations.

#[macro_use]
#[path = "../redis/common.rs"]
mod common;
mod dependency;
mod fault;
mod fleet;
mod replica;
mod scenario;

use fault::Fault;
use fleet::Topology;
use std::sync::{Arc, Mutex, OnceLock};

/// This process's log lines (the replicas in this process log here): one global subscriber
/// for the whole test binary.
fn log_lines() -> Vec<String> {
    sink()
        .0
        .lock()
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[derive(Clone, Default)]
struct Sink(Arc<Mutex<String>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().push_str(&String::from_utf8_lossy(b));
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn sink() -> Sink {
    static SINK: OnceLock<Sink> = OnceLock::new();
    SINK.get_or_init(|| {
        let sink = Sink::default();
        let writer = sink.clone();
        let _ = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .try_init();
        sink
    })
    .clone()
}

/// Runs `fault` in `topology` and asserts every expectation of the scenario.
async fn check(fault: Fault, topology: Topology) {
    let _ = sink();
    let Some(outcome) = scenario::run(fault, topology, log_lines).await else {
        return;
    };
    if outcome.violations.is_empty() {
        eprintln!("{}", outcome.report());
    }
    assert!(
        outcome.violations.is_empty(),
        "{} expectation(s) broken:\n{}",
        outcome.violations.len(),
        outcome.report()
    );
}

macro_rules! fault_tests {
    ($($name:ident => $fault:expr;)*) => {
        /// Replicas in this process, one store connection and replica id each.
        mod connections {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    check($fault, Topology::InProcess).await;
                }
            )*
        }
        /// One OS process per replica.
        mod processes {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    check($fault, Topology::Processes).await;
                }
            )*
        }
    };
}

fault_tests! {
    kill_9_and_restart_empty => Fault::Kill;
    flushall => Fault::Flush;
    sigstop_shorter_than_the_cooldown => Fault::HangShort;
    sigstop_longer_than_the_cooldown => Fault::HangLong;
    password_changed_and_clients_killed => Fault::Auth;
    failover_to_a_lagging_replica => Fault::Failover;
    keys_evicted_under_maxmemory => Fault::Evict;
    partition_dropping_replies => Fault::PartitionDrop;
    partition_delaying_past_the_timeout => Fault::PartitionDelay;
    partition_black_holed => Fault::PartitionBlackhole;
}

/// The README's table: every fault in both topologies, one after another; prints the rows
/// and each run's broken expectations, asserts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it with --ignored measure --nocapture --test-threads 1"]
async fn measure_every_fault() {
    let _ = sink();
    let mut rows = Vec::new();
    for fault in Fault::ALL {
        for topology in [Topology::InProcess, Topology::Processes] {
            let Some(outcome) = scenario::run(fault, topology, log_lines).await else {
                return;
            };
            eprintln!("{}", outcome.report());
            rows.push(outcome.row());
        }
    }
    println!(
        "| fault | replicas | calls failed because of the store | probes above the cap: \
         store healthy / during the fault | fault's end to every replica with the fleet | \
         then every replica rejects after: a trip / the fleet rate / quorum(2) |"
    );
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
