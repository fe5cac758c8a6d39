//! One replica of the fleet, the same code in this process and in a replica process: its own
//! store connection and replica id, one breaker per [`Spec`](crate::dependency::Spec) on
//! every path it runs, and one caller per breaker (the rate breaker excepted) calling the
//! dependency without pause: a call, then [`PACE`], then the next.

use crate::dependency::{index, Conn, Link, Path, Role, BREAKERS, NB};
use breaker_core::annotated;
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, SlidingWindow, State};
use breaker_core::config::{Format, Loader, PolicyRegistry};
use breaker_core::Error;
use breaker_macros::circuit_breaker;
use breaker_redis::{ReplicaId, SharedCircuitBreaker, Store, StoreConfig, StoreStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// How often a replica flushes its counts (and polls the fleet's states).
pub const FLUSH: Duration = Duration::from_millis(50);
/// The store operations' timeout.
pub const OP_TIMEOUT: Duration = Duration::from_millis(100);
/// The store's own breaker: open after this many failed operations ..
pub const STORE_FAILURES: u32 = 3;
/// .. for this long, doubling ..
pub const STORE_COOLDOWN: Duration = Duration::from_millis(50);
/// .. up to this.
pub const STORE_COOLDOWN_MAX: Duration = Duration::from_millis(200);
/// Every breaker's cooldown (no growth, no jitter).
pub const COOLDOWN: Duration = Duration::from_millis(500);
/// The probe wait, so the fleet's probe lease, of the breakers that set one (the attribute
/// has no option for it: its breakers have the default lease).
pub const PROBE_WAIT: Duration = Duration::from_secs(2);
/// Consecutive failures that trip a main or sentinel breaker.
pub const THRESHOLD: u32 = 3;
/// The rate breaker: trips at 50 % failures of at least this many calls in its window ..
pub const RATE_MIN_CALLS: u32 = 9;
/// .. of this length.
pub const RATE_WINDOW: Duration = Duration::from_secs(2);
/// The pause between two calls of a caller.
pub const PACE: Duration = Duration::from_millis(5);

/// The failure every path's calls fail with.
#[derive(Debug, PartialEq)]
pub struct Down;

/// The policy of a main or sentinel breaker: [`THRESHOLD`] consecutive failures, open
/// [`COOLDOWN`], one probe, closed after one success, a [`PROBE_WAIT`].
pub fn policy() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(THRESHOLD),
        window: SlidingWindow::Time {
            length: RATE_WINDOW,
            buckets: 10,
        },
        min_calls: RATE_MIN_CALLS,
        cooldown: COOLDOWN,
        cooldown_max: COOLDOWN,
        half_open_probes: 1,
        successes_to_close: 1,
        max_probe_wait: Some(PROBE_WAIT),
        ..BreakerPolicy::default()
    }
}

/// The rate breaker's policy: a failure rate of 50 % over [`RATE_WINDOW`], at least
/// [`RATE_MIN_CALLS`] calls, no consecutive rule.
pub fn rate_policy() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        ..policy()
    }
}

/// The config file of the `Conf` path: two policies of scope `shared`, one of `quorum(2)`.
const CONFIG: &str = r#"[policies.conf]
breaker = "3 consecutive, open 500ms, probes 1, close after 1, probe-wait 2s"
scope = "shared"

[policies.conf_s]
breaker = "3 consecutive, open 500ms, probes 1, close after 1, probe-wait 2s"
scope = "shared"

[policies.quorum]
breaker = "3 consecutive, open 500ms, probes 1, close after 1, probe-wait 2s"
scope = "quorum(2)"

[store]
url = "redis://127.0.0.1:1/"
namespace = "unused"
"#;

/// The store configuration of replica `r` (replica id `r{r}`).
pub fn store_config(url: &str, ns: &str, r: usize) -> StoreConfig {
    StoreConfig::new(url, ns)
        .expect("a valid store URL")
        .replica(ReplicaId::new(&format!("r{r}")).expect("a valid replica id"))
        .flush_interval(FLUSH)
        .flush_jitter(0.0)
        .op_timeout(OP_TIMEOUT)
        .connect_timeout(Duration::from_secs(2))
        .store_breaker(STORE_FAILURES, STORE_COOLDOWN, STORE_COOLDOWN_MAX)
}

#[circuit_breaker(crate = breaker_core, threshold = 3, cooldown = "500ms", half_open_probes = 1, name = "attr", scope = "shared")]
async fn attr(conn: &Mutex<Conn>, r: usize) -> Result<(), Down> {
    annotated_call(conn, r, "attr", index(Path::Attr, Role::Main)).await
}

#[circuit_breaker(crate = breaker_core, threshold = 3, cooldown = "500ms", half_open_probes = 1, name = "attr_s", scope = "shared")]
async fn attr_s(conn: &Mutex<Conn>, r: usize) -> Result<(), Down> {
    annotated_call(conn, r, "attr_s", index(Path::Attr, Role::Sentinel)).await
}

/// The body of an annotated function: a probe is a call its breaker admitted half-open.
async fn annotated_call(conn: &Mutex<Conn>, r: usize, name: &str, b: usize) -> Result<(), Down> {
    let probe = annotated::breaker(name).is_some_and(|br| br.state() == State::HalfOpen);
    if conn.lock().await.call(r, b, probe).await {
        Ok(())
    } else {
        Err(Down)
    }
}

/// How one breaker is called.
#[derive(Clone)]
enum Caller {
    Plain(CircuitBreaker),
    // Boxed: a pipeline is large beside a breaker handle.
    Pipe(Box<breaker_core::Pipeline>, CircuitBreaker),
    Conf(breaker_core::config::LivePipeline, CircuitBreaker),
    Attr(Role),
}

/// What one replica sees: whether its store reads healthy, and each breaker's local state
/// (`None` for a path it does not run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// `Store::status()` is `Healthy`.
    pub healthy: bool,
    /// By [`BREAKERS`] index.
    pub states: [Option<State>; NB],
}

impl View {
    /// One line: `1` or `0` for the store, then one letter per breaker.
    pub fn encode(&self) -> String {
        let mut s = String::from(if self.healthy { "1 " } else { "0 " });
        for st in &self.states {
            s.push(match st {
                None => '-',
                Some(State::Closed) => 'c',
                Some(State::Open) => 'o',
                Some(State::HalfOpen) => 'h',
                Some(State::ForcedOpen) => 'F',
                Some(State::ForcedClosed) => 'f',
            });
        }
        s
    }

    /// The inverse of [`encode`](Self::encode).
    ///
    /// # Panics
    /// On a line `encode` does not write.
    pub fn decode(line: &str) -> View {
        let (h, rest) = line.split_once(' ').expect("a view line");
        let mut states = [None; NB];
        assert_eq!(rest.chars().count(), NB, "a view line: {line:?}");
        for (i, c) in rest.chars().enumerate() {
            states[i] = match c {
                '-' => None,
                'c' => Some(State::Closed),
                'o' => Some(State::Open),
                'h' => Some(State::HalfOpen),
                'F' => Some(State::ForcedOpen),
                'f' => Some(State::ForcedClosed),
                _ => panic!("a view line: {line:?}"),
            };
        }
        View {
            healthy: h == "1",
            states,
        }
    }
}

/// One replica: see the [module docs](self).
pub struct Replica {
    index: usize,
    store: Store,
    link: Link,
    callers: Vec<Option<Caller>>,
    breakers: Vec<Option<CircuitBreaker>>,
    stop: Arc<AtomicBool>,
    quiet: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The rate breaker's handle, for [`Replica::diagnose`].
    rate: SharedCircuitBreaker,
    _registry: PolicyRegistry,
}

impl Replica {
    /// Connects replica `index` to the store at `url`, shares its breakers (every path but
    /// the attribute's unless `annotated`: that one installs the store, once per process),
    /// reads the fleet's state and starts its callers.
    ///
    /// # Errors
    /// What failed, in words.
    pub async fn start(
        r: usize,
        url: &str,
        ns: &str,
        link: Link,
        annotated: bool,
    ) -> Result<Replica, String> {
        let store = Store::connect(store_config(url, ns, r))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut callers: Vec<Option<Caller>> = vec![None; NB];
        let mut breakers: Vec<Option<CircuitBreaker>> = vec![None; NB];
        let mut rate = None;
        let mut build = |name: &str, policy: BreakerPolicy| -> Result<CircuitBreaker, String> {
            let b = CircuitBreaker::builder(policy)
                .name(name)
                .build()
                .map_err(|e| format!("build {name}: {e}"))?;
            // The handle is dropped (the breaker itself stays shared while anything holds
            // it), but the rate breaker's, kept for `diagnose`.
            let shared = store.share(&b).map_err(|e| format!("share {name}: {e}"))?;
            if name == BREAKERS[index(Path::Plain, Role::Rate)].name {
                rate = Some(shared);
            }
            Ok(b)
        };
        for (i, spec) in BREAKERS.iter().enumerate() {
            let caller = match (spec.path, spec.role) {
                (Path::Plain, Role::Rate) => {
                    let b = build(spec.name, rate_policy())?;
                    breakers[i] = Some(b.clone());
                    Caller::Plain(b)
                }
                (Path::Plain, _) => {
                    let b = build(spec.name, policy())?;
                    breakers[i] = Some(b.clone());
                    Caller::Plain(b)
                }
                (Path::Pipe, _) => {
                    let b = build(spec.name, policy())?;
                    breakers[i] = Some(b.clone());
                    let p = breaker_core::Pipeline::builder()
                        .breaker(b.clone())
                        .build()
                        .map_err(|e| format!("pipeline {}: {e}", spec.name))?;
                    Caller::Pipe(Box::new(p), b)
                }
                (Path::Conf, _) | (Path::Attr, _) => continue,
            };
            callers[i] = Some(caller);
        }
        let policies = Loader::text(CONFIG, Format::Toml)
            .load()
            .map_err(|e| format!("config: {e}"))?;
        let registry = PolicyRegistry::from_policies(policies.clone());
        drop(
            breaker_redis::share_policies(Some(&store), &policies, &registry)
                .map_err(|e| format!("share_policies: {e}"))?,
        );
        for role in [Role::Main, Role::Sentinel, Role::Quorum] {
            let i = index(Path::Conf, role);
            let name = BREAKERS[i].name;
            let b = registry
                .breaker(name)
                .ok_or_else(|| format!("no breaker {name}"))?;
            let p = registry
                .pipeline(name)
                .ok_or_else(|| format!("no pipeline {name}"))?;
            breakers[i] = Some(b.clone());
            callers[i] = Some(Caller::Conf(p, b));
        }
        if annotated {
            breaker_redis::install(store.clone()).map_err(|e| format!("install: {e}"))?;
            // The first calls share the functions' breakers (the dependency is healthy).
            let conn = Mutex::new(link.connect().await);
            attr(&conn, r)
                .await
                .map_err(|e| format!("attr's first call: {e:?}"))?;
            attr_s(&conn, r)
                .await
                .map_err(|e| format!("attr_s's first call: {e:?}"))?;
            for role in [Role::Main, Role::Sentinel] {
                let i = index(Path::Attr, role);
                breakers[i] = annotated::breaker(BREAKERS[i].name);
                callers[i] = Some(Caller::Attr(role));
            }
        }
        store.sync().await.map_err(|e| format!("sync: {e}"))?;
        let mut replica = Replica {
            index: r,
            store,
            link,
            callers,
            breakers,
            stop: Arc::default(),
            quiet: Arc::default(),
            tasks: Vec::new(),
            rate: rate.ok_or("no rate breaker")?,
            _registry: registry,
        };
        replica.spawn_callers().await;
        Ok(replica)
    }

    async fn spawn_callers(&mut self) {
        for (b, caller) in self.callers.iter().enumerate() {
            let Some(caller) = caller.clone() else {
                continue;
            };
            if BREAKERS[b].role.on_command() {
                continue;
            }
            let conn = Mutex::new(self.link.connect().await);
            let stop = Arc::clone(&self.stop);
            let quiet = Arc::clone(&self.quiet);
            let r = self.index;
            self.tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Acquire) {
                    if !quiet.load(Ordering::Acquire) {
                        call(&caller, &conn, r, b).await;
                    }
                    tokio::time::sleep(PACE).await;
                }
            }));
        }
    }

    /// Whether the callers pause (no traffic: a quiet replica) or call.
    pub fn set_quiet(&self, quiet: bool) {
        self.quiet.store(quiet, Ordering::Release);
    }

    /// One line for a broken expectation's report: the store's counters, then the rate
    /// breaker's fleet view (the word this replica's counts are fenced by) and its local
    /// snapshot.
    pub fn diagnose(&self) -> String {
        format!(
            "r{}: {:?}; rate fleet view {:?}; rate local {:?}",
            self.index,
            self.store.stats(),
            self.rate.fleet_view(),
            self.rate.breaker().snapshot()
        )
    }

    /// What this replica sees now.
    pub fn view(&self) -> View {
        let mut states = [None; NB];
        for (i, b) in self.breakers.iter().enumerate() {
            states[i] = b.as_ref().map(CircuitBreaker::state);
        }
        View {
            healthy: self.store.status() == StoreStatus::Healthy,
            states,
        }
    }

    fn caller(&self, b: usize) -> &Caller {
        self.callers[b].as_ref().unwrap_or_else(|| {
            panic!(
                "replica r{} runs no breaker {}",
                self.index, BREAKERS[b].name
            )
        })
    }

    /// `n` calls through breaker `b`, one after another: (succeeded, failed, rejected).
    pub async fn calls(&self, b: usize, n: u32) -> (u32, u32, u32) {
        let conn = Mutex::new(self.link.connect().await);
        let (mut ok, mut failed, mut rejected) = (0, 0, 0);
        for _ in 0..n {
            match call(self.caller(b), &conn, self.index, b).await {
                Outcome::Ok => ok += 1,
                Outcome::Failed => failed += 1,
                Outcome::Rejected => rejected += 1,
            }
        }
        (ok, failed, rejected)
    }

    /// Calls through breaker `b` (the dependency healthy) until it reads closed; `false` if it
    /// does not within `within`.
    pub async fn close(&self, b: usize, within: Duration) -> bool {
        let start = Instant::now();
        let conn = Mutex::new(self.link.connect().await);
        let breaker = self.breakers[b]
            .as_ref()
            .expect("a breaker of this replica");
        loop {
            if breaker.state() == State::Closed {
                return true;
            }
            if start.elapsed() > within {
                return false;
            }
            if call(self.caller(b), &conn, self.index, b).await == Outcome::Rejected {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    /// Stops the callers (bounded) and lets the store go.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

/// What became of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Failed,
    Rejected,
}

impl<T> From<Result<T, Error<Down>>> for Outcome {
    fn from(r: Result<T, Error<Down>>) -> Outcome {
        match r {
            Ok(_) => Outcome::Ok,
            Err(Error::Rejected(_)) => Outcome::Rejected,
            Err(_) => Outcome::Failed,
        }
    }
}

/// One call of replica `r` through breaker `b`'s path; a rejection is told to the dependency.
async fn call(caller: &Caller, conn: &Mutex<Conn>, r: usize, b: usize) -> Outcome {
    let outcome = match caller {
        Caller::Plain(br) => match br.try_acquire() {
            Ok(p) => {
                if conn.lock().await.call(r, b, p.is_probe()).await {
                    p.success();
                    Outcome::Ok
                } else {
                    p.failure();
                    Outcome::Failed
                }
            }
            Err(_) => Outcome::Rejected,
        },
        Caller::Pipe(pipeline, br) => pipeline.call(|| through(conn, br, r, b)).await.into(),
        Caller::Conf(pipeline, br) => pipeline.call(|| through(conn, br, r, b)).await.into(),
        Caller::Attr(role) => match role {
            Role::Main => attr(conn, r).await.into(),
            _ => attr_s(conn, r).await.into(),
        },
    };
    if outcome == Outcome::Rejected {
        conn.lock().await.rejected(r, b).await;
    }
    outcome
}

/// The operation a pipeline runs: a probe is a call its breaker admitted half-open.
async fn through(conn: &Mutex<Conn>, br: &CircuitBreaker, r: usize, b: usize) -> Result<(), Down> {
    let probe = br.state() == State::HalfOpen;
    if conn.lock().await.call(r, b, probe).await {
        Ok(())
    } else {
        Err(Down)
    }
}
