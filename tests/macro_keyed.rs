//! `#[circuit_breaker(key = ..)]`: one breaker per key, keyed on an expression over the
//! arguments and `self`; rejections name the key; the default name of a
//! method includes its type (events: `macro_keyed_events.rs`); the registry of keys is bounded (`max_keys`, `key_idle`), refuses
//! a new key when full of breakers that are open or in use, and keeps no per-key totals.

use breaker::circuit_breaker;
use breaker::{Error, Rejection};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

// ---------------------------------------------------------------------------------------------
// Two clients of one local HTTP server, independent through `key = self.base`

/// Requests that reached the server, per base path (`/down`, `/up`).
#[derive(Default)]
struct Hits {
    down: AtomicU32,
    up: AtomicU32,
}

/// Serves `/down/..` with 503 and `/up/..` with 200 on 127.0.0.1 (an OS-chosen port).
async fn server() -> (String, Arc<Hits>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(Hits::default());
    let served = Arc::clone(&hits);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let hits = Arc::clone(&served);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let hits = Arc::clone(&hits);
                    async move {
                        let (status, body) = if req.uri().path().starts_with("/down/") {
                            hits.down.fetch_add(1, Ordering::SeqCst);
                            (StatusCode::SERVICE_UNAVAILABLE, "down")
                        } else {
                            hits.up.fetch_add(1, Ordering::SeqCst);
                            (StatusCode::OK, "42")
                        };
                        let mut resp =
                            Response::new(Full::new(Bytes::from_static(body.as_bytes())));
                        *resp.status_mut() = status;
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), hits)
}

#[derive(Debug)]
enum HttpError {
    Status(u16),
    Transport(#[allow(dead_code)] reqwest::Error),
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    #[circuit_breaker(threshold = 2, cooldown = "60s", key = self.base)]
    async fn get_price(&self, sku: &str) -> Result<String, HttpError> {
        let url = format!("{}/price/{sku}", self.base);
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(HttpError::Transport)?;
        if resp.status().is_server_error() {
            return Err(HttpError::Status(resp.status().as_u16()));
        }
        resp.text().await.map_err(HttpError::Transport)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_with_different_bases_have_independent_breakers() {
    let (origin, hits) = server().await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let down = Client {
        http: http.clone(),
        base: format!("{origin}/down"),
    };
    let up = Client {
        http,
        base: format!("{origin}/up"),
    };
    for _ in 0..2 {
        assert!(matches!(
            down.get_price("abc").await,
            Err(Error::Inner(HttpError::Status(503)))
        ));
    }
    // `down`'s breaker is open: refused locally, naming the method (with its type). The key is
    // the caller's own (a rejection is a plain value; the breaker's events name the key,
    // `tests/macro_keyed_events.rs`).
    let Err(Error::Rejected(Rejection::Breaker(r))) = down.get_price("abc").await else {
        panic!("expected a rejection by `down`'s breaker")
    };
    assert_eq!(r.name(), "macro_keyed::Client::get_price");
    let shown = r.to_string();
    assert!(
        shown.starts_with("circuit breaker `macro_keyed::Client::get_price` is open"),
        "{shown}"
    );
    assert_eq!(hits.down.load(Ordering::SeqCst), 2);
    // `up` shares the function but not the breaker: every call reaches the server, on the
    // multi-threaded runtime and from spawned tasks (the future is `Send`).
    let up = Arc::new(up);
    for _ in 0..3 {
        let up = Arc::clone(&up);
        let price = tokio::spawn(async move { up.get_price("abc").await })
            .await
            .unwrap();
        assert_eq!(price.unwrap(), "42");
    }
    assert_eq!(hits.up.load(Ordering::SeqCst), 3);
    let keys = breaker::annotated::keys("macro_keyed::Client::get_price").unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys.get(down.base.as_str()).unwrap().key(), down.base);
}

// ---------------------------------------------------------------------------------------------
// Bounds

#[derive(Debug)]
struct Down;

#[circuit_breaker(threshold = 1, key = host, max_keys = 2, key_idle = "1m", name = "bounded")]
async fn bounded(host: &str, fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(1)
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_full_registry_refuses_a_new_key_until_an_idle_closed_breaker_can_go() {
    assert_eq!(bounded("a", true).await.unwrap_err().attempts(), 1); // a: open
    assert_eq!(bounded("b", false).await.unwrap(), 1); // b: closed
                                                       // Full: a is open, b was just used. A new key is refused, naming the function.
    let Err(Error::Rejected(Rejection::Keys(full))) = bounded("c", false).await else {
        panic!("expected the registry of keys to be full")
    };
    assert_eq!(full.max_keys(), 2);
    assert_eq!(full.name(), "bounded");
    assert_eq!(
        full.to_string(),
        "breaker registry is full: 2 keys, none of them idle and closed"
    );
    // Known keys still work.
    assert_eq!(bounded("b", false).await.unwrap(), 1);
    let keys = breaker::annotated::keys("bounded").unwrap();
    assert_eq!(keys.max_keys(), 2);
    // No per-key lifetime totals.
    assert_eq!(keys.get("b").unwrap().snapshot().totals, None);
    // After `key_idle` (and its 1/16 granularity) b is idle and closed: c takes its place;
    // a is kept, it is open.
    tokio::time::advance(Duration::from_secs(65)).await;
    assert_eq!(bounded("c", false).await.unwrap(), 1);
    assert_eq!(keys.len(), 2);
    assert!(keys.get("a").is_some());
    assert!(keys.get("b").is_none());
    assert!(keys.get("c").is_some());
}

#[circuit_breaker(threshold = 1, key = host, name = "default_bounds")]
async fn default_bounds(host: &str) -> Result<u32, Down> {
    Ok(u32::try_from(host.len()).unwrap())
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn keyed_breakers_are_bounded_by_default() {
    for host in ["a", "b", "c"] {
        default_bounds(host).await.unwrap();
    }
    let keys = breaker::annotated::keys("default_bounds").unwrap();
    assert_eq!(keys.max_keys(), breaker::__private::DEFAULT_MAX_KEYS);
    assert_eq!(breaker::__private::DEFAULT_MAX_KEYS, 10_000);
    assert_eq!(keys.len(), 3);
    // Closed and unused for the default `key_idle` (10 minutes, plus its 1/16 granularity).
    tokio::time::advance(Duration::from_secs(600 + 40)).await;
    assert_eq!(keys.evict_idle(), 3);
    assert!(keys.is_empty());
}
