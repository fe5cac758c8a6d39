//! The dependency every replica calls, and the test's only witness of what the callers saw.
//!
//! It lives in the test process. Replicas in the same process call it directly; replica
//! processes call it over a loopback TCP connection per caller ([`serve`], [`Conn`]). The
//! scenario makes it fail for one replica and one breaker at a time (a trip), and tells it,
//! per breaker, from when on a rejection cannot be the dependency's doing (the breaker's
//! cooldown and probe have long passed since its last failure): every rejection after that
//! is a call **failed because of the store**. It counts the half-open probes in flight
//! across the fleet, per breaker, split by whether the probe started while the store was
//! healthy (the cap holds) or during a fault (the documented store-loss bound holds).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Replicas a fleet may have.
pub const MAX_REPLICAS: usize = 4;

/// How a replica calls through a breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// `CircuitBreaker::try_acquire` on a breaker shared with `Store::share`.
    Plain,
    /// A `Pipeline` built with a breaker shared with `Store::share`.
    Pipe,
    /// A config file's policy of `scope = "shared"`: `share_policies`, the registry's pipeline.
    Conf,
    /// `#[circuit_breaker(scope = "shared")]` with `breaker_redis::install` (replica processes
    /// only: a process installs one store).
    Attr,
}

impl Path {
    /// Every path.
    pub const ALL: [Path; 4] = [Path::Plain, Path::Pipe, Path::Conf, Path::Attr];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Path::Plain => "try_acquire",
            Path::Pipe => "pipeline",
            Path::Conf => "config scope",
            Path::Attr => "attribute",
        }
    }
}

/// What a breaker is for in the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Tripped before the fault (the fault hits an open fleet), checked after it.
    Main,
    /// Closed when the fault ends; tripped on one replica at the fault's end, to time when
    /// every replica decides with the fleet again.
    Sentinel,
    /// A fleet failure-rate rule only (no consecutive rule), called on command only.
    Rate,
    /// Scope `quorum(2)`: the fleet opens when 2 replicas tripped; called on command only.
    Quorum,
}

impl Role {
    /// Whether the scenario calls it on command only (no caller runs on it).
    pub fn on_command(self) -> bool {
        matches!(self, Role::Rate | Role::Quorum)
    }
}

/// One breaker of every replica: its shared name, how it is called and its role.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// The breaker's (and, for `Conf`, the policy's; for `Attr`, the function's) name.
    pub name: &'static str,
    /// How it is called.
    pub path: Path,
    /// What for.
    pub role: Role,
}

/// Every replica's breakers; an index into this is a breaker's id in the dependency.
pub const BREAKERS: [Spec; 10] = [
    Spec {
        name: "plain",
        path: Path::Plain,
        role: Role::Main,
    },
    Spec {
        name: "plain_s",
        path: Path::Plain,
        role: Role::Sentinel,
    },
    Spec {
        name: "pipe",
        path: Path::Pipe,
        role: Role::Main,
    },
    Spec {
        name: "pipe_s",
        path: Path::Pipe,
        role: Role::Sentinel,
    },
    Spec {
        name: "conf",
        path: Path::Conf,
        role: Role::Main,
    },
    Spec {
        name: "conf_s",
        path: Path::Conf,
        role: Role::Sentinel,
    },
    Spec {
        name: "attr",
        path: Path::Attr,
        role: Role::Main,
    },
    Spec {
        name: "attr_s",
        path: Path::Attr,
        role: Role::Sentinel,
    },
    Spec {
        name: "rate",
        path: Path::Plain,
        role: Role::Rate,
    },
    Spec {
        name: "quorum",
        path: Path::Conf,
        role: Role::Quorum,
    },
];

/// Number of breakers per replica.
pub const NB: usize = BREAKERS.len();

/// The index of the breaker of `path` and `role`.
pub fn index(path: Path, role: Role) -> usize {
    BREAKERS
        .iter()
        .position(|s| s.path == path && s.role == role)
        .expect("a breaker of that path and role")
}

/// How long an ordinary call takes at the dependency.
pub const CALL_LATENCY: Duration = Duration::from_millis(3);
/// How long a probe takes at the dependency: long enough for probes of different replicas to
/// overlap when the fleet admits more than its cap.
pub const PROBE_LATENCY: Duration = Duration::from_millis(30);

/// What one breaker's callers saw, across the fleet.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// Calls that reached the dependency.
    pub calls: u64,
    /// Calls rejected by the breaker (any replica).
    pub rejected: u64,
    /// Rejections while the dependency had been healthy for longer than the grace: calls
    /// failed because of the store.
    pub store_failed: u64,
    /// Most probes in flight at once among probes started while the store was healthy.
    pub max_probes_healthy: u64,
    /// Most probes in flight at once, all of them (probes started during a fault included).
    pub max_probes_all: u64,
    /// When the first store-failed rejection happened (since the dependency started), and on
    /// which replica.
    pub first_store_failed: Option<(Duration, usize)>,
    /// When the last one happened.
    pub last_store_failed: Option<Duration>,
}

#[derive(Default)]
struct Per {
    calls: AtomicU64,
    rejected: AtomicU64,
    store_failed: AtomicU64,
    /// By replica: its rejections are not the store's doing before this (ns since start;
    /// `u64::MAX`: never).
    quiet_until: [AtomicU64; MAX_REPLICAS],
    probes: AtomicU64,
    probes_healthy: AtomicU64,
    max_probes_healthy: AtomicU64,
    max_probes_all: AtomicU64,
    first: Mutex<Option<(Duration, usize)>>,
    last: Mutex<Option<Duration>>,
}

/// The dependency: see the [module docs](self).
pub struct Dependency {
    start: Instant,
    failing: [[AtomicBool; NB]; MAX_REPLICAS],
    per: [Per; NB],
    /// Probes that start now are counted against the store-loss bound, not the cap.
    fault_window: AtomicBool,
}

impl Dependency {
    /// A healthy dependency; every rejection counts as the store's until told otherwise.
    pub fn new() -> Arc<Dependency> {
        Arc::new(Dependency {
            start: Instant::now(),
            failing: Default::default(),
            per: Default::default(),
            fault_window: AtomicBool::new(false),
        })
    }

    fn since(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.start).as_nanos()).unwrap_or(u64::MAX)
    }

    /// One call of replica `r` through breaker `b`; `probe` if the breaker admitted it as a
    /// half-open probe. `true`: the dependency answered well.
    pub async fn call(&self, r: usize, b: usize, probe: bool) -> bool {
        let per = &self.per[b];
        per.calls.fetch_add(1, Ordering::Relaxed);
        let ok = !self.failing[r][b].load(Ordering::Acquire);
        if !probe {
            tokio::time::sleep(CALL_LATENCY).await;
            return ok;
        }
        let healthy = !self.fault_window.load(Ordering::Acquire);
        let all = per.probes.fetch_add(1, Ordering::AcqRel) + 1;
        per.max_probes_all.fetch_max(all, Ordering::AcqRel);
        if healthy {
            let n = per.probes_healthy.fetch_add(1, Ordering::AcqRel) + 1;
            per.max_probes_healthy.fetch_max(n, Ordering::AcqRel);
        }
        tokio::time::sleep(PROBE_LATENCY).await;
        per.probes.fetch_sub(1, Ordering::AcqRel);
        if healthy {
            per.probes_healthy.fetch_sub(1, Ordering::AcqRel);
        }
        ok
    }

    /// Replica `r`'s breaker `b` rejected a call.
    pub fn rejected(&self, r: usize, b: usize) {
        let per = &self.per[b];
        per.rejected.fetch_add(1, Ordering::Relaxed);
        let now = self.since(Instant::now());
        if now < per.quiet_until[r].load(Ordering::Acquire) {
            return;
        }
        per.store_failed.fetch_add(1, Ordering::Relaxed);
        let at = Duration::from_nanos(now);
        let mut first = per.first.lock().unwrap();
        if first.is_none() {
            *first = Some((at, r));
        }
        *per.last.lock().unwrap() = Some(at);
    }

    /// Makes replica `r`'s calls through breaker `b` fail. This also stops counting `b`'s
    /// rejections (on every replica: a trip is the fleet's) as the store's, until
    /// [`heal`](Self::heal).
    pub fn fail(&self, r: usize, b: usize) {
        for q in &self.per[b].quiet_until {
            q.store(u64::MAX, Ordering::Release);
        }
        self.failing[r][b].store(true, Ordering::Release);
    }

    /// Replica `r`'s calls through breaker `b` succeed again; `b`'s rejections (on every
    /// replica) count as the store's once `grace` has passed (the cooldown and a probe, with
    /// margin).
    pub fn heal(&self, r: usize, b: usize, grace: Duration) {
        self.failing[r][b].store(false, Ordering::Release);
        let until = self.since(Instant::now() + grace);
        for q in &self.per[b].quiet_until {
            q.store(until, Ordering::Release);
        }
    }

    /// Replica `r`'s rejections on `b` are not counted as the store's for `grace` from now,
    /// unless they were not counted for longer already.
    pub fn quiet_for(&self, r: usize, b: usize, grace: Duration) {
        let until = self.since(Instant::now() + grace);
        self.per[b].quiet_until[r].fetch_max(until, Ordering::AcqRel);
    }

    /// `b`'s rejections are never counted (a breaker called on command only).
    pub fn never_count(&self, b: usize) {
        for q in &self.per[b].quiet_until {
            q.store(u64::MAX, Ordering::Release);
        }
    }

    /// Whether probes that start now count against the store-loss bound (during a fault).
    pub fn set_fault_window(&self, on: bool) {
        self.fault_window.store(on, Ordering::Release);
    }

    /// What breaker `b`'s callers saw so far.
    pub fn counts(&self, b: usize) -> Counts {
        let per = &self.per[b];
        let l = |c: &AtomicU64| c.load(Ordering::Acquire);
        Counts {
            calls: l(&per.calls),
            rejected: l(&per.rejected),
            store_failed: l(&per.store_failed),
            max_probes_healthy: l(&per.max_probes_healthy),
            max_probes_all: l(&per.max_probes_all),
            first_store_failed: *per.first.lock().unwrap(),
            last_store_failed: *per.last.lock().unwrap(),
        }
    }

    /// Time since the dependency started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// Serves `dep` to replica processes on a loopback port: one line per request, `c R B P`
/// (a call of replica R through breaker B, P = 1 for a probe; answered `1` or `0`) or `x R B`
/// (a rejection; answered `k`).
pub async fn serve(dep: Arc<Dependency>) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the dependency");
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let dep = Arc::clone(&dep);
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let f: Vec<&str> = line.split(' ').collect();
                    let num = |i: usize| f.get(i).and_then(|s| s.parse::<usize>().ok());
                    let reply: &[u8] = match (f.first().copied(), num(1), num(2)) {
                        (Some("c"), Some(r), Some(b)) if r < MAX_REPLICAS && b < NB => {
                            if dep.call(r, b, num(3) == Some(1)).await {
                                b"1\n"
                            } else {
                                b"0\n"
                            }
                        }
                        (Some("x"), Some(r), Some(b)) if r < MAX_REPLICAS && b < NB => {
                            dep.rejected(r, b);
                            b"k\n"
                        }
                        _ => panic!("the dependency got a line it does not know: {line:?}"),
                    };
                    if write.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, task)
}

/// A caller's connection to the dependency: direct (same process) or one TCP connection.
pub enum Conn {
    /// The dependency itself.
    Local(Arc<Dependency>),
    /// A connection to [`serve`].
    Remote {
        /// Replies.
        read: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
        /// Requests.
        write: tokio::net::tcp::OwnedWriteHalf,
    },
}

/// Where a replica's callers find the dependency.
#[derive(Clone)]
pub enum Link {
    /// In this process.
    Local(Arc<Dependency>),
    /// Served at this address.
    Remote(SocketAddr),
}

impl Link {
    /// A connection for one caller.
    ///
    /// # Panics
    /// If the dependency's port does not answer.
    pub async fn connect(&self) -> Conn {
        match self {
            Link::Local(d) => Conn::Local(Arc::clone(d)),
            Link::Remote(addr) => {
                let stream = TcpStream::connect(addr).await.expect("the dependency");
                let _ = stream.set_nodelay(true);
                let (read, write) = stream.into_split();
                Conn::Remote {
                    read: BufReader::new(read).lines(),
                    write,
                }
            }
        }
    }
}

impl Conn {
    async fn ask(&mut self, line: String) -> String {
        let Conn::Remote { read, write } = self else {
            unreachable!("only a remote connection asks")
        };
        write
            .write_all(line.as_bytes())
            .await
            .expect("the dependency is reachable");
        read.next_line()
            .await
            .expect("the dependency answers")
            .expect("the dependency answers")
    }

    /// A call of replica `r` through breaker `b`; `true`: it went well.
    pub async fn call(&mut self, r: usize, b: usize, probe: bool) -> bool {
        match self {
            Conn::Local(d) => d.call(r, b, probe).await,
            Conn::Remote { .. } => {
                self.ask(format!("c {r} {b} {}\n", u8::from(probe))).await == "1"
            }
        }
    }

    /// Replica `r`'s breaker `b` rejected a call.
    pub async fn rejected(&mut self, r: usize, b: usize) {
        match self {
            Conn::Local(d) => d.rejected(r, b),
            Conn::Remote { .. } => {
                let _ = self.ask(format!("x {r} {b}\n")).await;
            }
        }
    }
}
