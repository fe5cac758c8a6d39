//! A fleet of replicas through an outage: local breakers against one breaker shared through
//! Redis, measured on a real socket.
//!
//! The example starts a `redis-server` on a free loopback port (unless `--redis URL` is
//! given), a small HTTP service on loopback, and N replica **processes** (this program,
//! re-executed with `--role replica`). Each replica runs a few callers that call the service
//! through a [`CircuitBreaker`] (5 consecutive failures, open 300 ms, one half-open probe); the
//! fleet is uneven, as behind a real load balancer: replica `r0` runs 4 callers, the others 1.
//! The service goes through three phases: `healthy` (answers `200` at once), `outage`
//! (answers `503` after 150 ms), `recovery` (healthy again). The run is done twice:
//!
//! - **local**: every replica's breaker is its own (no store);
//! - **shared**: every replica shares its breaker with [`Store::share`]: a trip anywhere opens
//!   every replica (pushed), and the fleet admits one probe at a time (a lease).
//!
//! It prints a table: requests that reached the service during the outage, the most
//! concurrent probes the service saw, the time from the first trip until every replica
//! rejected, store operations per 1,000 calls; writes an SVG of every replica's state over
//! time; and ends with a line CI checks, such as
//! `fleet check: shared max_probes=1 local max_probes=8`.
//!
//! **`--fault kill|flush|hang`** adds a store fault to the shared run, across the service's
//! recovery (from 400 ms before it to 400 ms after it): `kill` SIGKILLs the `redis-server`
//! and restarts it empty on the same port, `flush` sends it `FLUSHALL` (at the start of that
//! span), `hang` stops it with SIGSTOP and resumes it with SIGCONT. The run goes on 4 s past
//! the recovery, every replica prints its breaker's transitions as they happen (with the
//! replica that caused each one), the coordinator prints the fault's steps, and a second
//! table tells what the fault cost each scope: calls rejected while the service was healthy
//! (after the breaker's cooldown and the store's own failure detection: those are the
//! store's doing), and the time from the fault's end until every replica's breaker closed
//! for good. The SVG marks the fault. A last line CI checks says whether the shared fleet
//! survived it: `fleet fault check: hang shared rejected_healthy=0 every_replica_closed=yes`.
//!
//! ```text
//! cargo run --release --example fleet                  # 8 replicas, about 20 s
//! cargo run --release --example fleet -- --quick       # 6 replicas, about 8 s
//! cargo run --release --example fleet -- --quick --fault hang
//! cargo run --release --example fleet -- --redis redis://127.0.0.1:6379/ --replicas 12
//! ```
//!
//! Network: loopback only; every loop is bounded in time; the child processes and the Redis
//! server it started are killed when it ends.

use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_redis::{ReplicaId, Store, StoreConfig};
use breaker_sim::plot::{self, Chart, Panel};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The command line. `--role replica` and the options after it are how the coordinator
/// starts its replicas (hidden from `--help`).
#[derive(clap::Parser)]
#[command(
    name = "fleet",
    bin_name = "fleet",
    about = "A fleet of replicas through an outage: local breakers against one breaker shared \
             through Redis"
)]
struct Args {
    /// A short run: 6 replicas, about 8 s (default 8 replicas, about 20 s).
    #[arg(long)]
    quick: bool,
    /// How many replica processes, 1 to 64 (default 8, or 6 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=64))]
    replicas: Option<u8>,
    /// A store fault during the shared run, across the service's recovery.
    #[arg(long, value_enum, value_name = "FAULT")]
    fault: Option<Fault>,
    /// Use this Redis server instead of starting one (not with --fault).
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Where to write the SVG of every replica's state over time.
    #[arg(long, value_name = "PATH", default_value = "target/fleet.svg")]
    svg: String,
    #[arg(long, hide = true)]
    role: Option<String>,
    #[arg(long, hide = true)]
    scope: Option<String>,
    #[arg(long, hide = true)]
    id: Option<String>,
    #[arg(long, hide = true)]
    service: Option<SocketAddr>,
    #[arg(long, hide = true)]
    epoch: Option<u64>,
    #[arg(long, hide = true)]
    ns: Option<String>,
}

/// A store fault during the shared run (`--fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Fault {
    /// SIGKILL, restarted empty on the same port when the fault ends.
    Kill,
    /// `FLUSHALL` when the fault starts.
    Flush,
    /// SIGSTOP, SIGCONT when the fault ends.
    Hang,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Flush => "flush",
            Fault::Hang => "hang",
        }
    }
}

/// How long a store fault lasts on each side of the service's recovery.
const FAULT_SPAN: Duration = Duration::from_millis(400);
/// How long a run with a fault goes on after the service's recovery.
const FAULT_AFTERMATH: Duration = Duration::from_secs(4);

/// The phases, from the common start: healthy until `OUTAGE_AT`, outage until `RECOVER_AT`;
/// with a fault, the store fails from `fault_at` until `fault_end`.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    outage_at: Duration,
    recover_at: Duration,
    end: Duration,
    fault: Option<Fault>,
    fault_at: Duration,
    fault_end: Duration,
}

impl Schedule {
    fn new(quick: bool, fault: Option<Fault>) -> Schedule {
        let (outage_at, recover_at, end) = if quick {
            (
                Duration::from_millis(800),
                Duration::from_millis(2800),
                Duration::from_millis(3600),
            )
        } else {
            (
                Duration::from_secs(2),
                Duration::from_secs(7),
                Duration::from_secs(9),
            )
        };
        Schedule {
            outage_at,
            recover_at,
            end: if fault.is_some() {
                recover_at + FAULT_AFTERMATH
            } else {
                end
            },
            fault,
            fault_at: recover_at - FAULT_SPAN,
            fault_end: recover_at + FAULT_SPAN,
        }
    }

    /// From here every call the service answers is answered well (a call made in the outage
    /// is answered by then): a replica whose breaker closes after this has seen the service
    /// healthy, and every rejection of that replica afterwards is the store's doing.
    fn healthy_from(&self) -> Duration {
        self.recover_at + OUTAGE_LATENCY
    }
}

const OUTAGE_LATENCY: Duration = Duration::from_millis(150);
const CALLERS: usize = 4;
const PACE: Duration = Duration::from_millis(5);
const BUCKET: Duration = Duration::from_millis(100);

fn policy() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(5),
        cooldown: Duration::from_millis(300),
        cooldown_max: Duration::from_millis(300),
        half_open_probes: 1,
        successes_to_close: 1,
        // The probe lease: longer than any call (the client's timeout is 1 s).
        max_probe_wait: Some(Duration::from_secs(2)),
        ..BreakerPolicy::default()
    }
}

fn unix_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(0)
}

/// The local instant of the common start `epoch_ms` (Unix milliseconds).
fn start_instant(epoch_ms: u64) -> Instant {
    let now = unix_ms();
    if epoch_ms >= now {
        Instant::now() + Duration::from_millis(epoch_ms - now)
    } else {
        Instant::now()
            .checked_sub(Duration::from_millis(now - epoch_ms))
            .unwrap_or_else(Instant::now)
    }
}

fn main() -> std::process::ExitCode {
    // `--help` prints the usage and exits 0; an unknown argument or a bad value prints the
    // error and the usage line and exits 2.
    let args = <Args as clap::Parser>::parse();
    let result = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(BoxError::from)
        .and_then(|rt| {
            if args.role.as_deref() == Some("replica") {
                rt.block_on(replica(&args))
            } else {
                rt.block_on(coordinator(&args))
            }
        });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The replica process

/// What a replica reports (one JSON line on stdout).
#[derive(Default)]
struct Report {
    calls: u64,
    rejected: u64,
    /// Rejections after the breaker closed with the service healthy ([`Schedule::healthy_from`]).
    rejected_healthy: u64,
    store_ops: u64,
    /// Its first rejection after the outage began, nanoseconds from the start.
    first_reject_ns: Option<u64>,
    /// Its first local open state after the outage began.
    first_open_ns: Option<u64>,
    transitions: Vec<(u64, State)>,
    buckets: Vec<[u32; 4]>,
}

async fn replica(args: &Args) -> Result<(), BoxError> {
    let scope = args.scope.clone().ok_or("a replica needs --scope")?;
    let id = args.id.clone().ok_or("a replica needs --id")?;
    let service = args.service.ok_or("a replica needs --service")?;
    let epoch = args.epoch.ok_or("a replica needs --epoch")?;
    let quick = args.quick;
    let fault = args.fault;
    let schedule = Schedule::new(quick, fault);
    let start = start_instant(epoch);
    let since = move || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let transitions: Arc<Mutex<Vec<(u64, State)>>> = Arc::default();
    let sink = Arc::clone(&transitions);
    let me = id.clone();
    let live = fault.is_some() && scope == "shared";
    // When the breaker first closed with the service healthy (ns from the start).
    let healthy_from = u64::try_from(schedule.healthy_from().as_nanos()).unwrap_or(0);
    let closed_healthy = Arc::new(AtomicU64::new(u64::MAX));
    let closed = Arc::clone(&closed_healthy);
    let breaker = CircuitBreaker::builder(policy())
        .name("checkout")
        .on_transition(move |t| {
            let at = since();
            sink.lock().unwrap().push((at, t.to));
            if t.to == State::Closed && at >= healthy_from {
                closed.fetch_min(at, Ordering::AcqRel);
            }
            if live {
                // The recovery, live: every replica's transitions as they happen.
                let origin = t
                    .origin
                    .as_deref()
                    .map_or(String::new(), |o| format!(" (from {o})"));
                // One write per line, so the replicas' lines do not interleave.
                let line = format!(
                    "{:>8.3} s  {me:<4} {} -> {}{origin}\n",
                    at as f64 / 1e9,
                    t.from.as_str(),
                    t.to.as_str()
                );
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            }
        })
        .build()?;
    let mut store = None;
    let shared = if scope == "shared" {
        let url = args.redis.clone().ok_or("a shared replica needs --redis")?;
        let ns = args.ns.clone().ok_or("a shared replica needs --ns")?;
        let config = StoreConfig::new(&url, &ns)?
            .replica(ReplicaId::new(&id)?)
            .flush_interval(Duration::from_millis(100));
        let st = Store::connect(config).await?;
        let shared = st.share(&breaker)?;
        st.sync().await?;
        store = Some(st);
        Some(shared)
    } else {
        None
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .pool_max_idle_per_host(CALLERS)
        .build()?;
    tokio::time::sleep_until(start.into()).await;
    let report = Arc::new(Mutex::new(Report {
        buckets: vec![[0; 4]; (schedule.end.as_millis() / BUCKET.as_millis()) as usize + 1],
        ..Report::default()
    }));
    let mut tasks = Vec::new();
    // An uneven fleet, as behind a real load balancer: one busy replica, the others light.
    let callers = if id == "r0" { CALLERS } else { 1 };
    for _ in 0..callers {
        let (client, report, breaker) = (client.clone(), Arc::clone(&report), breaker.clone());
        let closed_healthy = Arc::clone(&closed_healthy);
        let url = format!("http://{service}/call");
        let scope = scope.clone();
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < schedule.end {
                let at = start.elapsed();
                let bucket = (at.as_millis() / BUCKET.as_millis()) as usize;
                // One call, through the breaker itself: after `store.share(&breaker)` its own
                // `try_acquire` is fleet-wide (a probe needs a fleet lease).
                let outcome = match breaker.try_acquire() {
                    Ok(p) => {
                        let probe = p.is_probe();
                        let ok = call(&client, &url, &scope, probe).await;
                        if ok {
                            p.success()
                        } else {
                            p.failure()
                        }
                        Some(ok)
                    }
                    Err(_) => None,
                };
                {
                    let mut r = report.lock().unwrap();
                    r.calls += 1;
                    let b = r.buckets.len().saturating_sub(1).min(bucket);
                    match outcome {
                        Some(true) => r.buckets[b][0] += 1,
                        Some(false) => r.buckets[b][1] += 1,
                        None => {
                            r.buckets[b][2] += 1;
                            r.rejected += 1;
                            let at_ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
                            if at_ns >= closed_healthy.load(Ordering::Acquire) {
                                r.rejected_healthy += 1;
                            }
                            if at >= schedule.outage_at && r.first_reject_ns.is_none() {
                                r.first_reject_ns = Some(u64::try_from(at.as_nanos()).unwrap_or(0));
                            }
                        }
                    }
                }
                tokio::time::sleep(PACE).await;
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let mut r = std::mem::take(&mut *report.lock().unwrap());
    r.transitions = transitions.lock().unwrap().clone();
    let outage = u64::try_from(schedule.outage_at.as_nanos()).unwrap_or(0);
    r.first_open_ns = r
        .transitions
        .iter()
        .find(|(t, s)| *t >= outage && *s == State::Open)
        .map(|(t, _)| *t);
    if let Some(st) = &store {
        r.store_ops = st.stats().operations;
    }
    drop(shared);
    let json = serde_json::json!({
        "id": id,
        "calls": r.calls,
        "rejected": r.rejected,
        "rejected_healthy": r.rejected_healthy,
        "store_ops": r.store_ops,
        "first_reject_ns": r.first_reject_ns,
        "first_open_ns": r.first_open_ns,
        "transitions": r.transitions.iter().map(|(t, s)| (t, s.as_str())).collect::<Vec<_>>(),
        "buckets": r.buckets,
    });
    println!("{json}");
    Ok(())
}

/// One request; `true` for a `200`.
async fn call(client: &reqwest::Client, url: &str, scope: &str, probe: bool) -> bool {
    client
        .get(url)
        .header("x-scope", scope)
        .header("x-probe", if probe { "1" } else { "0" })
        .send()
        .await
        .is_ok_and(|r| r.status() == StatusCode::OK)
}

// ---------------------------------------------------------------------------------------------
// The service

#[derive(Default)]
struct Counters {
    outage_requests: AtomicU64,
    probes_in_flight: AtomicU64,
    max_probes: AtomicU64,
}

struct Service {
    start: Mutex<Option<Instant>>,
    schedule: Schedule,
    /// Index 0: local, 1: shared.
    counters: [Counters; 2],
}

impl Service {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let scope = usize::from(req.headers().get("x-scope").is_some_and(|v| v == "shared"));
        let probe = req.headers().get("x-probe").is_some_and(|v| v == "1");
        let c = &self.counters[scope];
        let at = self.start.lock().unwrap().map(|s| s.elapsed());
        let outage =
            at.is_some_and(|t| t >= self.schedule.outage_at && t < self.schedule.recover_at);
        if probe {
            let now = c.probes_in_flight.fetch_add(1, Ordering::AcqRel) + 1;
            c.max_probes.fetch_max(now, Ordering::AcqRel);
        }
        let status = if outage {
            c.outage_requests.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(OUTAGE_LATENCY).await;
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        };
        if probe {
            c.probes_in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        let mut r = Response::new(Full::new(Bytes::from_static(b"")));
        *r.status_mut() = status;
        r
    }
}

async fn serve(listener: TcpListener, service: Arc<Service>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = Arc::clone(&service);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let service = Arc::clone(&service);
                async move { Ok::<_, Infallible>(service.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The coordinator

/// A `redis-server` child process on a loopback port (no persistence), killed on drop.
struct RedisServer {
    child: Child,
    port: u16,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A stopped server is resumed first, so it is reaped at once; one already killed and
        // reaped (`--fault kill`) is left alone, or `kill` would say it has no such process.
        if let Ok(None) = self.child.try_wait() {
            let _ = signal(&self.child, "-CONT");
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl RedisServer {
    fn spawn(port: u16) -> Result<RedisServer, BoxError> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start redis-server ({e}): install it, or pass --redis redis://host:port/"
                )
            })?;
        let server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err("redis-server did not start within 5 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, then a fresh, empty server on the same port.
    fn restart(&mut self) -> Result<(), BoxError> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = RedisServer::spawn(self.port)?;
        Ok(())
    }
}

/// Sends `sig` (`-STOP`, `-CONT`) to `child`.
fn signal(child: &Child, sig: &str) -> Result<(), BoxError> {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()?;
    if !status.success() {
        return Err(format!("kill {sig} {} failed", child.id()).into());
    }
    Ok(())
}

fn start_redis() -> Result<(RedisServer, String), BoxError> {
    let port = StdListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let server = RedisServer::spawn(port)?;
    Ok((server, format!("redis://127.0.0.1:{port}/")))
}

/// `FLUSHALL` on the server at `127.0.0.1:port`, in the protocol's own words.
fn flushall(port: u16) -> Result<(), BoxError> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.write_all(b"*1\r\n$8\r\nFLUSHALL\r\n")?;
    let mut reply = [0u8; 5];
    conn.read_exact(&mut reply)?;
    if &reply != b"+OK\r\n" {
        return Err(format!("FLUSHALL answered {:?}", String::from_utf8_lossy(&reply)).into());
    }
    Ok(())
}

/// Causes `fault` on `server` during the shared run (times from the common start `start`),
/// printing each step; gives the server back when the fault is over.
fn cause(
    fault: Fault,
    mut server: RedisServer,
    schedule: Schedule,
    start: Instant,
) -> Result<RedisServer, BoxError> {
    // `start` may still be ahead: the replicas start together at the common start.
    let wait_until = |at: Duration| {
        let target = start + at;
        let now = Instant::now();
        if target > now {
            std::thread::sleep(target - now);
        }
    };
    let say = |what: &str| eprintln!("{:>8.3} s  store {what}", start.elapsed().as_secs_f64());
    wait_until(schedule.fault_at);
    match fault {
        Fault::Flush => {
            flushall(server.port)?;
            say("FLUSHALL: every key gone");
        }
        Fault::Kill => {
            let _ = server.child.kill();
            let _ = server.child.wait();
            say("killed (SIGKILL)");
            wait_until(schedule.fault_end);
            server.restart()?;
            say(&format!("restarted empty on port {}", server.port));
        }
        Fault::Hang => {
            signal(&server.child, "-STOP")?;
            say("hung (SIGSTOP)");
            wait_until(schedule.fault_end);
            signal(&server.child, "-CONT")?;
            say("resumed (SIGCONT)");
        }
    }
    Ok(server)
}

/// One run's measurements.
struct Run {
    scope: &'static str,
    outage_requests: u64,
    max_probes: u64,
    all_rejecting: Option<Duration>,
    calls: u64,
    store_ops: u64,
    panels: Vec<Panel>,
    /// Calls rejected by a replica whose breaker had closed with the service healthy (see
    /// [`Schedule::healthy_from`]): the store's doing.
    rejected_healthy: u64,
    /// From the fault's end until every replica's breaker closed for good (`None`: some
    /// replica's last state is not closed; `Some(None)`: all had closed before it ended).
    all_closed_after_fault: Option<Option<Duration>>,
}

async fn run(
    scope: &'static str,
    replicas: usize,
    quick: bool,
    (redis, server): (&str, &mut Option<RedisServer>),
    service: &Arc<Service>,
    addr: SocketAddr,
) -> Result<Run, BoxError> {
    let schedule = service.schedule;
    let epoch = unix_ms() + 1500;
    let fault = schedule.fault.filter(|_| scope == "shared");
    let ns = format!("fleet-{}-{scope}", std::process::id());
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for r in 0..replicas {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--role",
            "replica",
            "--scope",
            scope,
            "--id",
            &format!("r{r}"),
        ])
        .args([
            "--service",
            &addr.to_string(),
            "--epoch",
            &epoch.to_string(),
        ])
        .args(["--redis", redis, "--ns", &ns])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        if quick {
            cmd.arg("--quick");
        }
        if let Some(f) = schedule.fault {
            cmd.args(["--fault", f.name()]);
        }
        children.push(Kill(Some(cmd.spawn()?)));
    }
    *service.start.lock().unwrap() = Some(start_instant(epoch));
    let faulty = match (fault, server.take()) {
        (Some(f), Some(own)) => {
            let start = start_instant(epoch);
            Some(tokio::task::spawn_blocking(move || {
                cause(f, own, schedule, start)
            }))
        }
        (_, own) => {
            *server = own;
            None
        }
    };
    let mut reports = Vec::new();
    for mut c in children {
        let child = c.0.take().expect("spawned");
        let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await??;
        if !out.status.success() {
            return Err(format!("a {scope} replica failed: {}", out.status).into());
        }
        let line = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(line.trim())?;
        reports.push(v);
    }
    if let Some(task) = faulty {
        *server = Some(task.await??);
    }
    let c = &service.counters[usize::from(scope == "shared")];
    let u = |v: &serde_json::Value, k: &str| v[k].as_u64();
    let first_open = reports.iter().filter_map(|r| u(r, "first_open_ns")).min();
    let last_reject = reports
        .iter()
        .map(|r| u(r, "first_reject_ns"))
        .collect::<Option<Vec<u64>>>()
        .and_then(|v| v.into_iter().max());
    let all_rejecting = match (first_open, last_reject) {
        (Some(a), Some(b)) => Some(Duration::from_nanos(b.saturating_sub(a))),
        _ => None,
    };
    let panels: Vec<Panel> = reports
        .iter()
        .map(|r| Panel {
            label: format!("{scope} {}", r["id"].as_str().unwrap_or("?")),
            states: Some(
                std::iter::once((0, State::Closed))
                    .chain(
                        r["transitions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|t| {
                                let at = t[0].as_u64()?;
                                let s = match t[1].as_str()? {
                                    "open" => State::Open,
                                    "half_open" | "half-open" => State::HalfOpen,
                                    "forced_open" | "forced-open" => State::ForcedOpen,
                                    "forced_closed" | "forced-closed" => State::ForcedClosed,
                                    _ => State::Closed,
                                };
                                Some((at, s))
                            }),
                    )
                    .collect(),
            ),
            buckets: r["buckets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| {
                    let n =
                        |i: usize| u32::try_from(b[i].as_u64().unwrap_or(0)).unwrap_or(u32::MAX);
                    [n(0), n(1), n(2), n(3)]
                })
                .collect(),
            bucket_ns: u64::try_from(BUCKET.as_nanos()).unwrap_or(0),
        })
        .collect();
    let rejected_healthy = reports
        .iter()
        .filter_map(|r| u(r, "rejected_healthy"))
        .sum();
    let fault_end = u64::try_from(schedule.fault_end.as_nanos()).unwrap_or(0);
    let all_closed_after_fault = panels
        .iter()
        .map(|p| match p.states.as_deref().and_then(<[_]>::last) {
            Some((at, State::Closed)) => Some(*at),
            _ => None,
        })
        .collect::<Option<Vec<u64>>>()
        .map(|v| {
            v.into_iter()
                .max()
                .unwrap_or(0)
                .checked_sub(fault_end)
                .map(Duration::from_nanos)
        });
    Ok(Run {
        scope,
        outage_requests: c.outage_requests.load(Ordering::Acquire),
        max_probes: c.max_probes.load(Ordering::Acquire),
        all_rejecting,
        calls: reports.iter().filter_map(|r| u(r, "calls")).sum(),
        store_ops: reports.iter().filter_map(|r| u(r, "store_ops")).sum(),
        panels,
        rejected_healthy,
        all_closed_after_fault,
    })
}

/// A replica child, killed on drop (if the coordinator stops early).
struct Kill(Option<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

async fn coordinator(args: &Args) -> Result<(), BoxError> {
    let quick = args.quick;
    let replicas = usize::from(args.replicas.unwrap_or(if quick { 6 } else { 8 }));
    let svg = args.svg.clone();
    let fault = args.fault;
    let (mut own_server, redis) = match args.redis.clone() {
        // (A replica is given both: the coordinator's fault and its server's URL.)
        Some(_) if fault.is_some() => {
            return Err(
                "--fault kills, flushes or stops the example's own redis-server: \
                 leave out --redis"
                    .into(),
            )
        }
        Some(url) => (None, url),
        None => {
            let (s, url) = start_redis()?;
            (Some(s), url)
        }
    };
    let schedule = Schedule::new(quick, fault);
    let mut runs = Vec::new();
    for scope in ["local", "shared"] {
        // A fresh service per run, so the counters and the phases are the run's own.
        let service = Arc::new(Service {
            start: Mutex::new(None),
            schedule,
            counters: Default::default(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(serve(listener, Arc::clone(&service)));
        println!("running {replicas} replicas with {scope} breakers...");
        let r = run(
            scope,
            replicas,
            quick,
            (&redis, &mut own_server),
            &service,
            addr,
        )
        .await;
        server.abort();
        runs.push(r?);
    }
    println!();
    println!(
        "{replicas} replica processes (r0 with {CALLERS} callers, the others 1 each); outage from {:?} to {:?} (503 after {:?})",
        schedule.outage_at, schedule.recover_at, OUTAGE_LATENCY
    );
    println!(
        "| scope  | requests during outage | max concurrent probes | trip to all rejecting | store ops / 1,000 calls |"
    );
    println!("|---|---|---|---|---|");
    for r in &runs {
        let all = r.all_rejecting.map_or("never".to_owned(), |d| {
            format!("{:.1} ms", d.as_secs_f64() * 1e3)
        });
        let ops = if r.calls == 0 {
            0.0
        } else {
            r.store_ops as f64 * 1000.0 / r.calls as f64
        };
        println!(
            "| {:<6} | {:>22} | {:>21} | {:>21} | {:>23.2} |",
            r.scope, r.outage_requests, r.max_probes, all, ops
        );
    }
    if let Some(f) = fault {
        println!();
        println!(
            "store fault `{}` in the shared run from {:?} to {:?}; the service healthy from {:?}: \
             a rejection by a replica whose breaker had closed after {:?} is the store's doing",
            f.name(),
            schedule.fault_at,
            schedule.fault_end,
            schedule.recover_at,
            schedule.healthy_from()
        );
        println!(
            "| scope  | calls rejected, service healthy | fault's end to every replica closed |"
        );
        println!("|---|---|---|");
        for r in &runs {
            let closed = match r.all_closed_after_fault {
                None => "never".to_owned(),
                Some(None) => "closed before it ended".to_owned(),
                Some(Some(d)) => format!("{:.0} ms", d.as_secs_f64() * 1e3),
            };
            println!(
                "| {:<6} | {:>31} | {:>35} |",
                r.scope, r.rejected_healthy, closed
            );
        }
    }
    let end_ns = u64::try_from(schedule.end.as_nanos()).unwrap_or(0);
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(0);
    let phases = match fault {
        None => vec![
            ("healthy".into(), 0),
            ("outage".into(), ns(schedule.outage_at)),
            ("recovery".into(), ns(schedule.recover_at)),
        ],
        Some(f) => vec![
            ("healthy".into(), 0),
            ("outage".into(), ns(schedule.outage_at)),
            (format!("outage, store {}", f.name()), ns(schedule.fault_at)),
            (
                format!("recovery, store {}", f.name()),
                ns(schedule.recover_at),
            ),
            ("recovery, store back".into(), ns(schedule.fault_end)),
        ],
    };
    let chart = Chart {
        title: match fault {
            None => format!("fleet: {replicas} replicas' breaker states, local then shared"),
            Some(f) => format!(
                "fleet: {replicas} replicas' breaker states, local then shared (store fault `{}`)",
                f.name()
            ),
        },
        end_ns,
        phases,
        panels: runs.iter().flat_map(|r| r.panels.iter().cloned()).collect(),
    };
    let path = std::path::Path::new(&svg);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, plot::timeline_svg(&chart))?;
    println!("replica states: {svg}");
    let local = runs
        .iter()
        .find(|r| r.scope == "local")
        .map_or(0, |r| r.max_probes);
    let shared = runs
        .iter()
        .find(|r| r.scope == "shared")
        .map_or(0, |r| r.max_probes);
    println!("fleet check: shared max_probes={shared} local max_probes={local}");
    if let Some(f) = fault {
        if let Some(r) = runs.iter().find(|r| r.scope == "shared") {
            let closed = if r.all_closed_after_fault.is_some() {
                "yes"
            } else {
                "no"
            };
            println!(
                "fleet fault check: {} shared rejected_healthy={} every_replica_closed={closed}",
                f.name(),
                r.rejected_healthy
            );
        }
    }
    Ok(())
}
