//! Hedging and the adaptive concurrency limit against a real HTTP service on loopback.
//!
//! `cargo run --release --example layers` (about 5 s; `--quick` about 2 s).
//!
//! 1. **A slow tail.** The service answers in 5 ms, except one request in 20, which takes
//!    300 ms. The same calls run through `#[circuit_breaker]` clients with and without
//!    `hedge = "1x after p90 in 10ms..100ms"`: with hedging, a call still waiting after the
//!    recent 90th percentile gets a second request, so the p99 falls from the tail's 300 ms to
//!    about the hedge delay plus one fast answer, for a few per cent more requests.
//! 2. **A dependency that slows down.** The service's latency goes from 5 ms to 100 ms (as when
//!    it is overloaded) while 64 callers keep calling. Without a limit all 64 pile onto it;
//!    with `adaptive = "gradient2 4..64"` the limit falls with the latency once the first slow
//!    calls end, the calls in flight at the service drop to the limit, and the rest are
//!    rejected locally at once. "max in flight" is the service's peak over the second half of
//!    the slow part.
//!
//! It prints a table per phase and exits non-zero unless hedging cut the p99 and the adaptive
//! limit held the service's concurrency below the unlimited client's.

use breaker::circuit_breaker;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// The service's behaviour, changed between phases.
struct Service {
    /// Every `tail_every`th request takes `tail_ms`, the others `base_ms` (0: no tail).
    base_ms: AtomicU64,
    tail_ms: AtomicU64,
    tail_every: AtomicU64,
    requests: AtomicU64,
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
}

impl Service {
    fn set(&self, base_ms: u64, tail_ms: u64, tail_every: u64) {
        self.base_ms.store(base_ms, Ordering::SeqCst);
        self.tail_ms.store(tail_ms, Ordering::SeqCst);
        self.tail_every.store(tail_every, Ordering::SeqCst);
        self.requests.store(0, Ordering::SeqCst);
        self.max_in_flight.store(0, Ordering::SeqCst);
    }
}

/// One request in flight at the service, counted out when dropped.
struct InFlight(Arc<Service>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(service: Arc<Service>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = Arc::clone(&service);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_: Request<Incoming>| {
                    let s = Arc::clone(&service);
                    async move {
                        let n = s.requests.fetch_add(1, Ordering::SeqCst) + 1;
                        let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        s.max_in_flight.fetch_max(now, Ordering::SeqCst);
                        // Counted out however the request ends: a hedge's loser is dropped by
                        // the server when its client closes the connection.
                        let _in_flight = InFlight(Arc::clone(&s));
                        let every = s.tail_every.load(Ordering::SeqCst);
                        let ms = if every > 0 && n % every == 0 {
                            s.tail_ms.load(Ordering::SeqCst)
                        } else {
                            s.base_ms.load(Ordering::SeqCst)
                        };
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    base
}

async fn get(client: &reqwest::Client, base: &str) -> Result<(), reqwest::Error> {
    client.get(base).send().await?.error_for_status()?;
    Ok(())
}

#[circuit_breaker(threshold = 50, timeout = "2s", name = "tail_plain")]
async fn tail_plain(client: &reqwest::Client, base: &str) -> Result<(), reqwest::Error> {
    get(client, base).await
}

#[circuit_breaker(
    threshold = 50,
    timeout = "2s",
    hedge = "1x after p90 in 10ms..100ms",
    name = "tail_hedged"
)]
async fn tail_hedged(client: &reqwest::Client, base: &str) -> Result<(), reqwest::Error> {
    get(client, base).await
}

#[circuit_breaker(threshold = 1000, timeout = "5s", name = "slow_plain")]
async fn slow_plain(client: &reqwest::Client, base: &str) -> Result<(), reqwest::Error> {
    get(client, base).await
}

#[circuit_breaker(
    threshold = 1000,
    timeout = "5s",
    adaptive = "gradient2 4..64 from 32",
    name = "slow_limited"
)]
async fn slow_limited(client: &reqwest::Client, base: &str) -> Result<(), reqwest::Error> {
    get(client, base).await
}

/// The `p`th percentile of `sorted`.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What one client's run of a phase did.
struct Row {
    calls: usize,
    ok: usize,
    rejected: usize,
    requests: u64,
    max_in_flight: u32,
    p50: Duration,
    p99: Duration,
}

/// `workers` callers call `call` until `calls` calls have started, each timed.
async fn run<F, Fut>(service: &Service, workers: usize, calls: usize, call: F) -> Row
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), breaker::Error<reqwest::Error>>> + Send,
{
    let started = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..workers {
        let (call, started) = (call.clone(), Arc::clone(&started));
        handles.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while started.fetch_add(1, Ordering::SeqCst) < calls as u64 {
                let t = Instant::now();
                let r = call().await;
                out.push((t.elapsed(), r));
            }
            out
        }));
    }
    let mut times = Vec::new();
    let (mut ok, mut rejected) = (0, 0);
    for h in handles {
        for (d, r) in h.await.unwrap() {
            match r {
                Ok(()) => {
                    ok += 1;
                    times.push(d);
                }
                Err(breaker::Error::Rejected(_)) => rejected += 1,
                Err(_) => times.push(d),
            }
        }
    }
    times.sort();
    Row {
        calls: ok + rejected + (times.len() - ok),
        ok,
        rejected,
        requests: service.requests.load(Ordering::SeqCst),
        max_in_flight: service.max_in_flight.load(Ordering::SeqCst),
        p50: pct(&times, 50.0),
        p99: pct(&times, 99.0),
    }
}

/// `workers` callers call `call` for `length`; a caller whose call was rejected locally waits
/// 10 ms before its next (as a client backs off). With `measure_from`, the service's peak of
/// calls in flight is taken from that point on.
async fn run_for<F, Fut>(
    service: &Service,
    workers: usize,
    length: Duration,
    measure_from: Option<Duration>,
    call: F,
) -> Row
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), breaker::Error<reqwest::Error>>> + Send,
{
    let end = Instant::now() + length;
    let mut handles = Vec::new();
    for _ in 0..workers {
        let call = call.clone();
        handles.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while Instant::now() < end {
                let t = Instant::now();
                let r = call().await;
                let rejected = matches!(r, Err(breaker::Error::Rejected(_)));
                out.push((t.elapsed(), r));
                if rejected {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            out
        }));
    }
    if let Some(from) = measure_from {
        tokio::time::sleep(from).await;
        service.max_in_flight.store(0, Ordering::SeqCst);
    }
    let mut times = Vec::new();
    let (mut calls, mut ok, mut rejected) = (0, 0, 0);
    for h in handles {
        for (d, r) in h.await.unwrap() {
            calls += 1;
            match r {
                Ok(()) => {
                    ok += 1;
                    times.push(d);
                }
                Err(breaker::Error::Rejected(_)) => rejected += 1,
                Err(_) => times.push(d),
            }
        }
    }
    times.sort();
    Row {
        calls,
        ok,
        rejected,
        requests: service.requests.load(Ordering::SeqCst),
        max_in_flight: service.max_in_flight.load(Ordering::SeqCst),
        p50: pct(&times, 50.0),
        p99: pct(&times, 99.0),
    }
}

fn print(phase: &str, client: &str, r: &Row) {
    println!(
        "{phase:<10}{client:<14}{:>6}{:>8}{:>6}{:>9}{:>14}{:>10.1?}{:>10.1?}",
        r.calls, r.requests, r.ok, r.rejected, r.max_in_flight, r.p50, r.p99
    );
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let service = Arc::new(Service {
        base_ms: AtomicU64::new(5),
        tail_ms: AtomicU64::new(0),
        tail_every: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        in_flight: AtomicU32::new(0),
        max_in_flight: AtomicU32::new(0),
    });
    let base = serve(Arc::clone(&service)).await;
    let client = reqwest::Client::new();
    println!(
        "{:<10}{:<14}{:>6}{:>8}{:>6}{:>9}{:>14}{:>10}{:>10}",
        "phase", "client", "calls", "reached", "ok", "rejected", "max in flight", "p50", "p99"
    );

    // 1. A slow tail: 1 request in 20 takes 300 ms.
    let calls = if quick { 400 } else { 1200 };
    let mut p99 = Vec::new();
    for hedged in [false, true] {
        service.set(5, 300, 20);
        let (c, b) = (client.clone(), base.clone());
        let row = run(&service, 8, calls, move || {
            let (c, b) = (c.clone(), b.clone());
            async move {
                if hedged {
                    tail_hedged(&c, &b).await
                } else {
                    tail_plain(&c, &b).await
                }
            }
        })
        .await;
        print("slow tail", if hedged { "hedge" } else { "no hedge" }, &row);
        p99.push(row.p99);
    }

    // 2. The service slows from 5 ms to 100 ms under 64 concurrent callers. Each client first
    // calls it while it is fast (the adaptive limit learns its latency), then while it is slow;
    // the service's peak of calls in flight is taken over the second half of the slow part,
    // once the limit has seen the slow calls end.
    let slow = Duration::from_millis(if quick { 1200 } else { 3000 });
    let mut peak = Vec::new();
    for limited in [false, true] {
        let (c, b) = (client.clone(), base.clone());
        let call = move || {
            let (c, b) = (c.clone(), b.clone());
            async move {
                if limited {
                    slow_limited(&c, &b).await
                } else {
                    slow_plain(&c, &b).await
                }
            }
        };
        service.set(5, 0, 0);
        run_for(&service, 64, slow / 2, None, call.clone()).await;
        service.set(100, 0, 0);
        let row = run_for(&service, 64, slow, Some(slow / 2), call).await;
        print(
            "slowed",
            if limited { "adaptive" } else { "no limit" },
            &row,
        );
        peak.push(row.max_in_flight);
    }

    let hedging_cut_p99 = p99[1] < p99[0] / 2;
    let limit_held = peak[1] < peak[0];
    println!(
        "layers check: hedge p99 {:?} -> {:?} ({}), adaptive max in flight {} -> {} ({})",
        p99[0],
        p99[1],
        if hedging_cut_p99 { "cut" } else { "NOT cut" },
        peak[0],
        peak[1],
        if limit_held { "held" } else { "NOT held" }
    );
    if !(hedging_cut_p99 && limit_held) {
        std::process::exit(1);
    }
}
