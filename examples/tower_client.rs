//! A circuit breaker as tower middleware in front of a real HTTP client.
//!
//! A small hyper server on loopback answers `503` to its first three requests, then `200`.
//! The client is a tower `Service` (one hyper HTTP/1 connection per request) wrapped in a
//! [`BreakerLayer`] with the library's standard HTTP rules ([`HttpClassifier`]): hyper answers
//! `Ok(response)` for a 503, and the classifier calls that response a failure (a 4xx would be
//! neutral), while the caller still gets it. The breaker opens after three failures, rejects
//! the next calls locally without touching the network, and after its cooldown lets one probe
//! through, which succeeds and closes it.
//!
//! Loopback only, 10 requests, stops by itself; it exits with an error unless the server saw
//! exactly the calls the breaker let through and the breaker opened and closed again (CI runs
//! it):
//!
//! ```text
//! cargo run --example tower_client --features tower,http
//! ```

use breaker::breaker::State;
use breaker::breaker::{BreakerPolicy, CircuitBreaker};
use breaker::error::Rejection;
use breaker::http::HttpClassifier;
use breaker::tower::breaker::BreakerLayer;
use breaker::Error;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tower::{Layer, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves on `listener` until the task is aborted: 503 for the first three requests, then 200.
async fn serve(listener: TcpListener, hits: Arc<AtomicU32>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let hits = Arc::clone(&hits);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req: Request<Incoming>| {
                let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    let status = if n <= 3 {
                        StatusCode::SERVICE_UNAVAILABLE
                    } else {
                        StatusCode::OK
                    };
                    let mut resp = Response::new(Full::new(Bytes::from(format!("hit {n}"))));
                    *resp.status_mut() = status;
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// One GET over a fresh HTTP/1 connection; the body is read to the end.
async fn get(addr: SocketAddr) -> Result<Response<Bytes>, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let conn = tokio::spawn(conn);
    let req = Request::get(format!("http://{addr}/"))
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let resp = sender.send_request(req).await?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    drop(sender);
    let _ = conn.await;
    Ok(Response::from_parts(parts, body))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let hits = Arc::new(AtomicU32::new(0));
    let server = tokio::spawn(serve(listener, Arc::clone(&hits)));

    let breaker = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown: Duration::from_millis(200),
        cooldown_max: Duration::from_millis(200),
        ..BreakerPolicy::default()
    })
    .name("loopback")
    .totals(true) // lifetime totals are opt-in; the check at the end reads them
    .on_transition(|t| println!("  transition: {} -> {} ({})", t.from, t.to, t.reason))
    .build()?;
    let layer = BreakerLayer::new(breaker.clone()).with_classifier(HttpClassifier);
    let client = layer.layer(tower::service_fn(move |()| get(addr)));
    let (mut answered, mut rejected) = (0, 0);

    for i in 1..=10 {
        if i == 7 {
            println!("  (waiting out the 200 ms cooldown)");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        match client.clone().oneshot(()).await {
            // A 503 is a failure to the breaker, and still the caller's response.
            Ok(resp) => {
                answered += 1;
                println!(
                    "call {i:2}: {} {:?}",
                    resp.status(),
                    String::from_utf8_lossy(resp.body())
                );
            }
            Err(Error::Rejected(Rejection::Breaker(r))) => {
                rejected += 1;
                println!("call {i:2}: rejected locally: {r}");
            }
            Err(Error::Inner(e)) => println!("call {i:2}: transport error: {e}"),
            Err(e) => println!("call {i:2}: {e}"),
        }
    }
    let (state, reached) = (breaker.state(), hits.load(Ordering::SeqCst));
    println!("final state: {state}; {answered} answered, {rejected} rejected, {reached} reached the server");
    server.abort();
    // Three 503s open the breaker; calls 4 to 6 are refused locally; after the cooldown the
    // probe (call 7) gets a 200 and closes it; calls 8 to 10 go through.
    if (answered, rejected, reached, state) != (7, 3, 7, State::Closed) {
        return Err(format!(
            "expected 7 answered, 3 rejected, 7 requests at the server and a closed breaker; got \
             {answered}, {rejected}, {reached}, {state}"
        )
        .into());
    }
    let failed = breaker.snapshot().totals.map(|t| t.failed);
    if failed != Some(3) {
        return Err(format!(
            "expected the three 503 responses to count as breaker failures; got {failed:?}"
        )
        .into());
    }
    Ok(())
}
