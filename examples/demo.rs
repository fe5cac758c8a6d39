//! Why circuit breakers matter, measured on a real socket.
//!
//! A small HTTP service on loopback (port chosen by the OS) goes through scripted phases:
//!
//! | phase | the service |
//! |---|---|
//! | `healthy` | answers `200` in about 2 ms |
//! | `hang` | accepts the request and never answers: every call waits for the client's timeout |
//! | `503` | answers `503 Service Unavailable` at once |
//! | `429` | sheds every 4th request with `429 Too Many Requests` and `Retry-After: 1` |
//! | `recovery` | healthy again |
//!
//! Two sets of concurrent callers call it through `reqwest`, each caller at a steady pace, in
//! loops that stop when the script ends:
//! - **with breaker**: [`get_with_breaker`], an `async fn` annotated with
//!   `#[circuit_breaker(..)]` (a failure-rate breaker, a 400 ms timeout per attempt, 3 attempts
//!   with exponential backoff);
//! - **no breaker**: the same timeout and retry, built with the plain [`Pipeline`] API.
//!
//! The server counts the requests of each set (header `x-demo-client`). At the end the demo
//! prints the breaker's state transitions, a table per phase (calls made, requests that
//! reached the server, local rejections, successes, p50 and p99 of the caller's latency), a
//! sample of its Prometheus `/metrics` endpoint, writes an SVG chart of the timeline, and
//! prints a check line such as
//! `breaker transitions: closed->open x1, open->half-open x3, half-open->open x2, half-open->closed x1`.
//! It exits with status 1 if the breaker never opened, or never closed again.
//!
//! ```text
//! cargo run --release --example demo                      # about 45 s
//! cargo run --release --example demo -- --quick           # about 15 s
//! cargo run --release --example demo -- --config examples/demo.toml   # policies from a file
//! cargo run --release --example demo -- --svg /tmp/timeline.svg
//! cargo run --release --example demo -- --record target/demo-trace.jsonl   # for `breaker simulate`
//! ```
//!
//! With `--config FILE` (policy `demo`, or `--policy NAME`) both client sets are built from
//! the file with the plain API: the breaker set from the named policy, the other from the same
//! policy without its breaker, both with the standard HTTP classifier, which also honours
//! `Retry-After`. Environment overrides apply (`BREAKER__POLICIES__DEMO__BREAKER=...`).
//!
//! Network: loopback only; every loop is bounded in time and stops by itself.

#[path = "demo_parts/dashboard.rs"]
mod dashboard;

use breaker::breaker::{CircuitBreaker, State, Transition, TransitionReason};
use breaker::circuit_breaker;
use breaker::http::{HttpClassifier, HttpFailure};
use breaker::layer::Layer as PipelineLayer;
use breaker::observe;
use breaker::pipeline::PipelineBuilder;
use breaker::policy::Policy;
use breaker::record::Recorder;
use breaker::{Error, Pipeline};
use breaker_sim::plot::{self, Chart, Panel};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// ---------------------------------------------------------------------------------------------
// The two client sets

/// The breaker's name, as registered by the attribute and as labelled in `/metrics`.
const BREAKER_NAME: &str = "demo";

/// Index of the client set with a breaker in every per-set array.
const WITH: usize = 0;
/// Index of the client set without a breaker.
const WITHOUT: usize = 1;
/// Display names of the client sets, and their `x-demo-client` header values.
const SETS: [&str; 2] = ["breaker", "no breaker"];
const SET_HEADER: [&str; 2] = ["breaker", "plain"];

/// The timeout per attempt and the retry of both client sets (the attribute repeats them as
/// literals, which are checked at compile time).
const TIMEOUT: Duration = Duration::from_millis(400);
const RETRY: &str = "3x exp(50ms, max 200ms)";

/// Why a call to the service failed.
#[derive(Debug)]
enum CallError {
    /// The service answered with an error status (and maybe a `Retry-After`).
    Status(StatusCode, Option<Duration>),
    /// No usable answer: connect refused, connection reset, I/O error.
    Transport(reqwest::Error),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status(s, _) => write!(f, "status {s}"),
            CallError::Transport(e) => write!(f, "transport error: {e}"),
        }
    }
}

impl std::error::Error for CallError {}

impl HttpFailure for CallError {
    fn status(&self) -> Option<StatusCode> {
        match self {
            CallError::Status(s, _) => Some(*s),
            CallError::Transport(_) => None,
        }
    }
    fn retry_after(&self) -> Option<Duration> {
        match self {
            CallError::Status(_, d) => *d,
            CallError::Transport(_) => None,
        }
    }
}

/// One GET of the service's `/work`, marked with the client set's header.
async fn send(client: &reqwest::Client, url: &str, set: usize) -> Result<(), CallError> {
    let resp = client
        .get(url)
        .header("x-demo-client", SET_HEADER[set])
        .send()
        .await
        .map_err(CallError::Transport)?;
    let status = resp.status();
    if status.is_success() {
        resp.bytes().await.map_err(CallError::Transport)?;
        Ok(())
    } else {
        Err(CallError::Status(
            status,
            breaker::http::retry_after(resp.headers()),
        ))
    }
}

/// A call of the client set **with** a breaker: it trips when half of the last 20 attempts
/// failed, stays open 1 s, then lets one probe through. Each attempt
/// has its own 400 ms timeout; up to 3 attempts, retried outside the breaker (the default
/// order `retry > breaker > timeout`), so a rejection is never retried. Results are judged by
/// the standard HTTP rules (`classify = http`), which also honour `Retry-After`.
#[circuit_breaker(
    name = "demo",
    failure_rate = 50,
    window = 20,
    min_calls = 20,
    cooldown = "1s",
    timeout = "400ms",
    retry = "3x exp(50ms, max 200ms)",
    classify = http,
    record = demo_recorder,
)]
async fn get_with_breaker(client: &reqwest::Client, url: &str) -> Result<(), CallError> {
    send(client, url, WITH).await
}

/// How the calls of one client set run.
enum Caller {
    /// The annotated function [`get_with_breaker`].
    Annotated,
    /// A pipeline built with the plain API, judged by the standard HTTP rules.
    Plain(Box<Pipeline>),
}

impl Caller {
    async fn call(
        &self,
        client: &reqwest::Client,
        url: &str,
        set: usize,
    ) -> Result<(), Error<CallError>> {
        match self {
            Caller::Annotated => get_with_breaker(client, url).await,
            Caller::Plain(pipeline) => {
                pipeline
                    .call_with(&HttpClassifier, || send(client, url, set))
                    .await
            }
        }
    }
}

/// The two client sets of the default run: the annotated function, and the same timeout and
/// retry without a breaker.
fn attribute_callers() -> [Caller; 2] {
    let plain = Pipeline::builder()
        .timeout(TIMEOUT)
        .retry(RETRY.parse().expect("a valid retry"))
        .idempotent(true)
        .build()
        .expect("a valid pipeline");
    [Caller::Annotated, Caller::Plain(Box::new(plain))]
}

/// The two client sets of `--config`: the named policy, and the same policy without its
/// breaker, both with the standard HTTP classifier.
fn config_callers(policy: &Policy, timeline: &Arc<Timeline>) -> Result<[Caller; 2], BoxError> {
    let breaker_policy = policy
        .breaker
        .clone()
        .ok_or("the policy has no breaker; the demo needs one")?;
    let timeline = Arc::clone(timeline);
    let breaker = observe::instrument(
        CircuitBreaker::builder(breaker_policy)
            .name(BREAKER_NAME)
            .on_transition(move |t| timeline.push(t.clone())),
    )
    .build()?;
    observe::track(&breaker);
    let mut with = PipelineBuilder::from_policy(policy).breaker(breaker);
    if let Some(recorder) = demo_recorder() {
        with = with.recorder(recorder);
    }
    let with = with.build()?;
    let without = Pipeline::from_policy(&Policy {
        breaker: None,
        order: policy.order.as_ref().map(|o| {
            o.iter()
                .copied()
                .filter(|l| *l != PipelineLayer::Breaker)
                .collect()
        }),
        ..policy.clone()
    })?;
    Ok([
        Caller::Plain(Box::new(with)),
        Caller::Plain(Box::new(without)),
    ])
}

// ---------------------------------------------------------------------------------------------
// The script

/// What the service does during a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `200` after about 2 ms.
    Healthy,
    /// No answer until the phase ends (every caller times out first).
    Hang,
    /// `503` at once.
    Unavailable,
    /// Every 4th request of each client set gets `429` with `Retry-After: 1`.
    Throttled,
}

/// One phase of the script.
struct Phase {
    name: &'static str,
    kind: Kind,
    len: Duration,
}

/// The phases, and when they started (set once, after the warm-up).
struct Script {
    phases: Vec<Phase>,
    start: OnceLock<Instant>,
}

impl Script {
    /// The phases of a full run (about 45 s) or of `--quick` (about 15 s). Every phase lasts
    /// several times the 400 ms timeout and the 1 s cooldown, so the breaker has time to
    /// react even on a loaded machine.
    fn new(quick: bool) -> Script {
        let secs =
            |full: f64, quick_s: f64| Duration::from_secs_f64(if quick { quick_s } else { full });
        let phase = |name, kind, len| Phase { name, kind, len };
        Script {
            phases: vec![
                phase("healthy", Kind::Healthy, secs(6.0, 2.0)),
                phase("hang", Kind::Hang, secs(15.0, 4.0)),
                phase("503", Kind::Unavailable, secs(8.0, 2.5)),
                phase("429", Kind::Throttled, secs(6.0, 2.5)),
                phase("recovery", Kind::Healthy, secs(8.0, 3.0)),
            ],
            start: OnceLock::new(),
        }
    }

    fn total(&self) -> Duration {
        self.phases.iter().map(|p| p.len).sum()
    }

    /// When the script started; `None` during the warm-up.
    fn start(&self) -> Option<Instant> {
        self.start.get().copied()
    }

    /// The offset at which phase `i` starts.
    fn phase_start(&self, i: usize) -> Duration {
        self.phases[..i].iter().map(|p| p.len).sum()
    }

    /// The phase at `at`; `None` before the start and after the end.
    fn phase_at(&self, at: Instant) -> Option<usize> {
        let since = at.checked_duration_since(self.start()?)?;
        let mut end = Duration::ZERO;
        for (i, p) in self.phases.iter().enumerate() {
            end += p.len;
            if since < end {
                return Some(i);
            }
        }
        None
    }

    /// The phase at offset `t` since the start (the last one after the end).
    fn phase_at_offset(&self, t: Duration) -> usize {
        let mut end = Duration::ZERO;
        for (i, p) in self.phases.iter().enumerate() {
            end += p.len;
            if t < end {
                return i;
            }
        }
        self.phases.len() - 1
    }
}

// ---------------------------------------------------------------------------------------------
// The service

/// What the server shares between connections.
struct Service {
    script: Arc<Script>,
    /// Requests that reached the server, per phase and client set.
    reached: Vec<[AtomicU64; 2]>,
    /// Requests per client set during the `429` phase, to shed every 4th.
    throttle: [AtomicU64; 2],
    metrics: PrometheusHandle,
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp
}

impl Service {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        match req.uri().path() {
            "/metrics" => {
                let mut resp = text(StatusCode::OK, self.metrics.render());
                resp.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
                );
                resp
            }
            "/work" => self.work(&req).await,
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    async fn work(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let set = match req.headers().get("x-demo-client").map(|v| v.as_bytes()) {
            Some(b"plain") => WITHOUT,
            _ => WITH,
        };
        metrics::counter!("demo_server_requests_total", "client" => SET_HEADER[set]).increment(1);
        let phase = self.script.phase_at(Instant::now());
        if let Some(p) = phase {
            self.reached[p][set].fetch_add(1, Ordering::Relaxed);
        }
        let kind = phase.map_or(Kind::Healthy, |p| self.script.phases[p].kind);
        match kind {
            Kind::Healthy => {
                tokio::time::sleep(Duration::from_millis(2)).await;
                text(StatusCode::OK, "ok\n")
            }
            Kind::Hang => {
                // Bounded: answer when the phase is over (every caller has given up by then).
                let p = phase.expect("a hang phase is a phase of the script");
                let start = self.script.start().expect("started");
                let end = start + self.script.phase_start(p + 1);
                tokio::time::sleep_until(end.into()).await;
                text(StatusCode::SERVICE_UNAVAILABLE, "too late\n")
            }
            Kind::Unavailable => text(StatusCode::SERVICE_UNAVAILABLE, "unavailable\n"),
            Kind::Throttled => {
                if self.throttle[set].fetch_add(1, Ordering::Relaxed) % 4 == 3 {
                    let mut resp = text(StatusCode::TOO_MANY_REQUESTS, "slow down\n");
                    resp.headers_mut().insert(
                        hyper::header::RETRY_AFTER,
                        hyper::header::HeaderValue::from_static("1"),
                    );
                    resp
                } else {
                    // At once, like the 429s: a slower 200 would let the 429s reach the
                    // breaker's window first and skew it.
                    text(StatusCode::OK, "ok\n")
                }
            }
        }
    }
}

/// Accepts connections on `listener` until the task is aborted.
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
// The load

/// How one call ended, for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Ok,
    /// Rejected locally by the breaker: the network was not touched.
    Rejected,
    /// A timeout, an error status or a transport error (after any retries).
    Failed,
}

/// One call, as the caller saw it.
#[derive(Clone, Copy, Debug)]
struct Record {
    set: usize,
    phase: usize,
    /// When it started, since the script's start.
    at: Duration,
    latency: Duration,
    ended: Ended,
}

/// Live counts per phase and client set: calls, ok, rejected, failed.
struct Live {
    counts: Vec<[[AtomicU64; 4]; 2]>,
}

impl Live {
    fn new(phases: usize) -> Live {
        Live {
            counts: (0..phases).map(|_| Default::default()).collect(),
        }
    }

    fn add(&self, phase: usize, set: usize, ended: Ended) {
        let c = &self.counts[phase][set];
        c[0].fetch_add(1, Ordering::Relaxed);
        let i = match ended {
            Ended::Ok => 1,
            Ended::Rejected => 2,
            Ended::Failed => 3,
        };
        c[i].fetch_add(1, Ordering::Relaxed);
    }

    fn line(&self, phase: usize) -> String {
        let mut s = String::new();
        for (set, name) in SETS.iter().enumerate() {
            let c = &self.counts[phase][set];
            let [calls, ok, rejected, failed] = [0, 1, 2, 3].map(|i| c[i].load(Ordering::Relaxed));
            let _ = write!(
                s,
                " | {name}: {calls:>5} calls {ok:>5} ok {rejected:>5} rejected {failed:>4} failed"
            );
        }
        s
    }
}

/// Everything a caller needs.
struct Load {
    script: Arc<Script>,
    callers: [Caller; 2],
    clients: [reqwest::Client; 2],
    url: String,
    live: Live,
}

/// The pause between the calls of one caller.
const PERIOD: Duration = Duration::from_millis(50);

/// Caller `idx` of `n` of client set `set`: one call every [`PERIOD`] (staggered), until the
/// script ends.
async fn caller(load: Arc<Load>, set: usize, idx: u32, n: u32) -> Vec<Record> {
    let start = load.script.start().expect("started");
    tokio::time::sleep_until((start + PERIOD * idx / n).into()).await;
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut records = Vec::new();
    loop {
        tick.tick().await;
        let t0 = Instant::now();
        let Some(phase) = load.script.phase_at(t0) else {
            return records;
        };
        let result = load.callers[set]
            .call(&load.clients[set], &load.url, set)
            .await;
        let latency = t0.elapsed();
        let ended = match &result {
            Ok(()) => Ended::Ok,
            Err(Error::Rejected(_)) => Ended::Rejected,
            Err(_) => Ended::Failed,
        };
        load.live.add(phase, set, ended);
        records.push(Record {
            set,
            phase,
            at: t0 - start,
            latency,
            ended,
        });
    }
}

/// Prints one line per phase when it ends, and on a terminal a live line in between.
async fn progress(load: Arc<Load>, done: Arc<tokio::sync::Notify>) {
    let tty = std::io::stderr().is_terminal();
    let script = &load.script;
    let start = script.start().expect("started");
    let mut shown = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let finished = done.notified();
    tokio::pin!(finished);
    loop {
        let over = tokio::select! {
            _ = tick.tick() => false,
            _ = &mut finished => true,
        };
        let now = Instant::now();
        let current = match script.phase_at(now) {
            _ if over => script.phases.len(),
            Some(p) => p,
            None if now < start => 0,
            None => script.phases.len(),
        };
        while shown < current {
            if tty {
                eprint!("\r\x1b[2K");
            }
            let p = &script.phases[shown];
            println!(
                "[{:>5.1}s] {:<8} done{}",
                script.phase_start(shown + 1).as_secs_f64(),
                p.name,
                load.live.line(shown)
            );
            shown += 1;
        }
        if over {
            return;
        }
        if tty {
            let p = &script.phases[shown];
            eprint!(
                "\r\x1b[2K[{:>5.1}s] {:<8} ... {}",
                now.saturating_duration_since(start).as_secs_f64(),
                p.name,
                load.live.line(shown)
            );
            let _ = std::io::stderr().flush();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The breaker's transitions

/// The transitions seen, in order, with when they were seen.
#[derive(Default)]
struct Timeline {
    events: Mutex<Vec<(Instant, Transition)>>,
}

impl Timeline {
    fn push(&self, t: Transition) {
        let now = Instant::now();
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((now, t));
    }

    fn events(&self) -> Vec<(Instant, Transition)> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

// ---------------------------------------------------------------------------------------------
// The report

/// `812ns`, `4.1µs`, `1.9ms`, `1.35s`.
fn fmt_dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.1}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// The `q`-th percentile (nearest rank) of sorted latencies.
fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn sorted_latencies<'a>(records: impl Iterator<Item = &'a Record>) -> Vec<Duration> {
    let mut v: Vec<Duration> = records.map(|r| r.latency).collect();
    v.sort_unstable();
    v
}

/// The table per phase, with and without the breaker.
fn print_table(script: &Script, service: &Service, records: &[Record]) {
    println!();
    println!(
        "{:<9} {:<11} {:>6} {:>8} {:>9} {:>6} {:>7} {:>9} {:>9}",
        "phase", "client", "calls", "reached", "rejected", "ok", "failed", "p50", "p99"
    );
    for (p, phase) in script.phases.iter().enumerate() {
        for (set, name) in SETS.iter().enumerate() {
            let mine: Vec<&Record> = records
                .iter()
                .filter(|r| r.phase == p && r.set == set)
                .collect();
            let count = |e: Ended| mine.iter().filter(|r| r.ended == e).count();
            let lat = sorted_latencies(mine.iter().copied());
            let show = |q| percentile(&lat, q).map_or("-".into(), fmt_dur);
            println!(
                "{:<9} {:<11} {:>6} {:>8} {:>9} {:>6} {:>7} {:>9} {:>9}",
                if set == WITH { phase.name } else { "" },
                name,
                mine.len(),
                service.reached[p][set].load(Ordering::Relaxed),
                count(Ended::Rejected),
                count(Ended::Ok),
                count(Ended::Failed),
                show(50.0),
                show(99.0),
            );
        }
    }
    println!(
        "(calls: logical calls made; reached: HTTP requests the server received, retries \
         included; rejected: refused locally by the open breaker; latency: the caller's, per call)"
    );
}

/// The headline: what a call cost during the hanging outage.
fn print_hang_summary(script: &Script, records: &[Record]) {
    let Some(hang) = script.phases.iter().position(|p| p.kind == Kind::Hang) else {
        return;
    };
    let p50 = |f: &dyn Fn(&Record) -> bool| {
        percentile(
            &sorted_latencies(records.iter().filter(|r| r.phase == hang && f(r))),
            50.0,
        )
    };
    let plain = p50(&|r| r.set == WITHOUT);
    let rejected = p50(&|r| r.set == WITH && r.ended == Ended::Rejected);
    if let (Some(plain), Some(rejected)) = (plain, rejected) {
        println!(
            "\nDuring the hanging outage a caller without a breaker waited {} per call (p50, \
             every attempt up to the {} timeout); with the breaker open a call was refused in {} \
             (p50 of rejections), about {:.0}x faster.",
            fmt_dur(plain),
            fmt_dur(TIMEOUT),
            fmt_dur(rejected),
            plain.as_secs_f64() / rejected.as_secs_f64().max(1e-9)
        );
    }
}

/// `closed->open`.
fn edge(t: &Transition) -> String {
    format!("{}->{}", t.from.as_str(), t.to.as_str())
}

/// The timeline of transitions; returns the check line's counts, in order of first appearance.
fn print_timeline(script: &Script, events: &[(Instant, Transition)]) -> Vec<(String, usize)> {
    let start = script.start().expect("started");
    println!("\nbreaker timeline (breaker `{BREAKER_NAME}`, time since the start):");
    if events.is_empty() {
        println!("  (no transition)");
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (at, t) in events {
        let since = at.saturating_duration_since(start);
        let why = match t.reason {
            TransitionReason::FailureRate => format!(
                "{}: {} of the last {} calls failed",
                t.reason, t.window.failures, t.window.calls
            ),
            TransitionReason::ConsecutiveFailures => {
                format!("{}: {} in a row", t.reason, t.consecutive_failures)
            }
            r => r.to_string(),
        };
        println!(
            "  {:>6.2}s  {:<9} {:<10} -> {:<10} {}",
            since.as_secs_f64(),
            script.phases[script.phase_at_offset(since)].name,
            t.from.as_str(),
            t.to.as_str(),
            why
        );
        let e = edge(t);
        match counts.iter_mut().find(|(k, _)| *k == e) {
            Some((_, n)) => *n += 1,
            None => counts.push((e, 1)),
        }
    }
    counts
}

/// Prints the first lines of the server's own `/metrics`, fetched over HTTP.
async fn print_metrics_sample(client: &reqwest::Client, addr: SocketAddr) -> Result<(), BoxError> {
    let url = format!("http://{addr}/metrics");
    let body = client
        .get(&url)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let lines: Vec<&str> = body
        .lines()
        .filter(|l| {
            let name = l.trim_start_matches("# TYPE ");
            name.starts_with("breaker_") || name.starts_with("demo_")
        })
        .collect();
    println!(
        "\nmetrics sample (GET {url}, Prometheus text format, {} lines in all):",
        body.lines().count()
    );
    for l in lines.iter().take(24) {
        println!("  {l}");
    }
    if lines.len() > 24 {
        println!("  ... ({} more)", lines.len() - 24);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The SVG chart

/// Writes the timeline with the simulator's plotting code (`breaker_sim::plot`): the phases,
/// the breaker's state as colored bands, and the outcomes of each client set's calls per time
/// slice (by start time) as stacked bars.
fn write_svg(
    path: &Path,
    script: &Script,
    events: &[(Instant, Transition)],
    records: &[Record],
) -> std::io::Result<()> {
    let start = script.start().expect("started");
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let end_ns = nanos(script.total());
    let slices = 80u64;
    let bucket_ns = end_ns.div_ceil(slices);
    let mut states = vec![(0, State::Closed)];
    for (at, t) in events {
        states.push((nanos(at.saturating_duration_since(start)), t.to));
    }
    let last = states.last().map_or(State::Closed, |s| s.1);
    states.push((end_ns, last));
    let panels = SETS
        .iter()
        .enumerate()
        .map(|(set, name)| {
            let mut buckets = vec![[0u32; 4]; slices as usize];
            for r in records.iter().filter(|r| r.set == set) {
                let i = (nanos(r.at) / bucket_ns).min(slices - 1) as usize;
                let k = match r.ended {
                    Ended::Ok => 0,
                    Ended::Failed => 1,
                    Ended::Rejected => 2,
                };
                buckets[i][k] += 1;
            }
            Panel {
                label: (*name).to_owned(),
                states: (set == WITH).then(|| states.clone()),
                buckets,
                bucket_ns,
            }
        })
        .collect();
    let chart = Chart {
        title: format!(
            "breaker demo: state of breaker `{BREAKER_NAME}` and outcomes of calls over time"
        ),
        end_ns,
        phases: script
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.to_owned(), nanos(script.phase_start(i))))
            .collect(),
        panels,
    };
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    std::fs::write(path, plot::timeline_svg(&chart))
}

// ---------------------------------------------------------------------------------------------
// The command line and the run

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "demo",
    about = "A local HTTP service through an outage, called with and without a circuit breaker"
)]
struct Args {
    /// A short run (about 15 s instead of about 45 s).
    #[arg(long)]
    quick: bool,
    /// Build the clients from policy `demo` of FILE (e.g. examples/demo.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The policy of FILE to use.
    #[arg(long, value_name = "NAME", default_value = "demo")]
    policy: String,
    /// Where to write the timeline chart (default target/demo-timeline.svg).
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
    /// Record every attempt of the client set with the breaker to FILE (JSON Lines, labelled
    /// with the phases), to replay it with `breaker simulate --trace FILE`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

impl Args {
    /// The chart's path: `--svg`, or `demo-timeline.svg` in the target directory.
    fn svg_path(&self) -> PathBuf {
        self.svg.clone().unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
                .join("demo-timeline.svg")
        })
    }
}

/// The recorder of `--record`, read by the annotated function's `record = demo_recorder`
/// when its pipeline is built (at the warm-up call, after `run` has set it).
static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// What the breaker's client set records: the `--record` trace, then the dashboard's latency
/// percentiles.
fn demo_recorder() -> Option<Recorder> {
    dashboard::recorder(BREAKER_NAME, RECORDER.get().cloned())
}

/// The number of concurrent callers per client set.
fn callers_per_set(quick: bool) -> u32 {
    if quick {
        16
    } else {
        32
    }
}

async fn run(args: Args) -> Result<bool, BoxError> {
    // The exporter first: metric handles bind to the recorder installed when they are made.
    let recorder = PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    metrics::set_global_recorder(recorder)?;
    let timeline = Arc::new(Timeline::default());
    if let Some(path) = &args.record {
        // The file's folder is made if missing (`target/` before the first build in it).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("--record {}: {e}", dir.display()))?;
        }
        let recorder =
            Recorder::to_file(path).map_err(|e| format!("--record {}: {e}", path.display()))?;
        // The warm-up comes before the script's phases.
        recorder.phase("warm-up");
        let _ = RECORDER.set(recorder);
    }
    let _dashboard = dashboard::start().await?;

    let callers = match &args.config {
        None => {
            // The annotated function's breaker is built on its first call, with this listener.
            let timeline = Arc::clone(&timeline);
            breaker::annotated::on_transition(BREAKER_NAME, move |t| timeline.push(t.clone()))?;
            println!(
                "with breaker: #[circuit_breaker(failure_rate = 50, window = 20, min_calls = 20, \
                 cooldown = \"1s\", timeout = \"400ms\", retry = \"{RETRY}\")]"
            );
            println!("no breaker:   Pipeline::builder().timeout(400ms).retry(\"{RETRY}\")");
            attribute_callers()
        }
        Some(path) => {
            let policies = breaker::config::Loader::file(path).load()?;
            let policy = policies.get(&args.policy).ok_or_else(|| {
                format!(
                    "{}: no policy `{}` (it has: {})",
                    path.display(),
                    args.policy,
                    policies.names().collect::<Vec<_>>().join(", ")
                )
            })?;
            let mut text = String::new();
            breaker::config::write_policy(&mut text, &args.policy, &policy)?;
            println!(
                "with breaker: policy `{}` of {}:",
                args.policy,
                path.display()
            );
            for l in text.lines() {
                println!("  {l}");
            }
            println!("no breaker:   the same policy without its breaker");
            config_callers(&policy, &timeline)?
        }
    };

    if let Caller::Plain(pipeline) = &callers[WITH] {
        dashboard::show(BREAKER_NAME, pipeline);
    }

    let script = Arc::new(Script::new(args.quick));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let service = Arc::new(Service {
        script: Arc::clone(&script),
        reached: (0..script.phases.len())
            .map(|_| Default::default())
            .collect(),
        throttle: Default::default(),
        metrics,
    });
    let server = tokio::spawn(serve(listener, Arc::clone(&service)));

    let client = || {
        reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(64)
            .build()
    };
    let load = Arc::new(Load {
        script: Arc::clone(&script),
        callers,
        clients: [client()?, client()?],
        url: format!("http://{addr}/work"),
        live: Live::new(script.phases.len()),
    });

    // Warm-up (not counted): one call per set, which also creates the annotated function's
    // breaker (and its metrics, bound to the exporter installed above).
    for set in [WITH, WITHOUT] {
        load.callers[set]
            .call(&load.clients[set], &load.url, set)
            .await
            .map_err(|e| format!("warm-up call failed: {e}"))?;
    }

    let n = callers_per_set(args.quick);
    let phases: Vec<String> = script
        .phases
        .iter()
        .map(|p| format!("{} {}s", p.name, p.len.as_secs_f64()))
        .collect();
    println!(
        "service on http://{addr}; 2 x {n} callers, each calling every {}ms; phases: {}",
        PERIOD.as_millis(),
        phases.join(", ")
    );
    let started = Instant::now() + Duration::from_millis(100);
    script.start.set(started).map_err(|_| "started twice")?;
    if let Some(recorder) = RECORDER.get() {
        // Label the recorded calls with the phases, as they begin.
        let (recorder, script) = (recorder.clone(), Arc::clone(&script));
        tokio::spawn(async move {
            for (i, p) in script.phases.iter().enumerate() {
                tokio::time::sleep_until((started + script.phase_start(i)).into()).await;
                recorder.phase(p.name);
            }
        });
    }

    let mut tasks = Vec::new();
    for set in [WITH, WITHOUT] {
        for i in 0..n {
            tasks.push(tokio::spawn(caller(Arc::clone(&load), set, i, n)));
        }
    }
    let done = Arc::new(tokio::sync::Notify::new());
    let shown = tokio::spawn(progress(Arc::clone(&load), Arc::clone(&done)));
    let mut records = Vec::new();
    for t in tasks {
        records.extend(t.await?);
    }
    done.notify_one();
    shown.await?;

    let events = timeline.events();
    print_table(&script, &service, &records);
    print_hang_summary(&script, &records);
    let counts = print_timeline(&script, &events);
    let svg = args.svg_path();
    write_svg(&svg, &script, &events, &records)?;
    println!("\ntimeline chart: {}", svg.display());
    if let (Some(path), Some(recorder)) = (&args.record, RECORDER.get()) {
        let (written, dropped) = recorder.flush()?;
        println!(
            "recorded {written} attempts of the breaker's client set to {} ({dropped} dropped); \
             replay them with\n  cargo run --release --features cli --bin breaker -- simulate \
             --trace {} --config examples/demo.toml",
            path.display(),
            path.display()
        );
    }
    print_metrics_sample(&load.clients[WITHOUT], addr).await?;
    server.abort();

    let count = |e: &str| counts.iter().find(|(k, _)| k == e).map_or(0, |(_, n)| *n);
    let line: Vec<String> = counts.iter().map(|(e, n)| format!("{e} x{n}")).collect();
    let final_state = events.last().map_or(State::Closed, |(_, t)| t.to);
    println!(
        "\nbreaker transitions: {}",
        if line.is_empty() {
            "none".into()
        } else {
            line.join(", ")
        }
    );
    println!("breaker final state: {}", final_state.as_str());
    let opened = count("closed->open") > 0;
    let closed_again = count("half-open->closed") > 0 && final_state == State::Closed;
    if !opened {
        eprintln!("demo check failed: the breaker never opened");
    } else if !closed_again {
        eprintln!("demo check failed: the breaker did not close again");
    }
    Ok(opened && closed_again)
}

fn main() -> std::process::ExitCode {
    // `--help` prints the usage and exits 0; a usage error exits 2.
    let args = <Args as clap::Parser>::parse();
    let started = Instant::now();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = rt.block_on(run(args));
    // Hung requests of the server may still be sleeping; do not wait for them.
    rt.shutdown_background();
    match result {
        Ok(ok) => {
            println!("demo finished in {:.1}s", started.elapsed().as_secs_f64());
            if ok {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
