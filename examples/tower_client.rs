//! A circuit breaker as tower middleware in front of a real HTTP client.
//!
//! A small hyper server on loopback answers `503` to its first three requests, then `200`.
//! The client is a tower `Service` (one hyper HTTP/1 connection per request) wrapped in a
//! [`BreakerLayer`] whose classifier treats 5xx as failures and 4xx as neutral. The breaker
//! opens after three failures, rejects the next calls locally without touching the network,
//! and after its cooldown lets one probe through, which succeeds and closes it.
//!
//! Loopback only, 10 requests, stops by itself:
//!
//! ```text
//! cargo run --example tower_client --features tower
//! ```

use breaker::breaker::{BreakerPolicy, CircuitBreaker};
use breaker::tower::breaker::{BreakerError, BreakerLayer};
use breaker::Outcome;
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
async fn serve(listener: TcpListener) {
    let hits = Arc::new(AtomicU32::new(0));
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

/// 5xx: failure; other statuses: success except 4xx, which says nothing about the server's
/// health (neutral); transport errors: failure.
fn classify(result: &Result<Response<Bytes>, BoxError>) -> Outcome {
    match result {
        Ok(r) if r.status().is_server_error() => Outcome::Failure,
        Ok(r) if r.status().is_client_error() => Outcome::Ignored,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(serve(listener));

    let breaker = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown: Duration::from_millis(200),
        cooldown_max: Duration::from_millis(200),
        ..BreakerPolicy::default()
    })
    .name("loopback")
    .on_transition(|t| println!("  transition: {:?} -> {:?} ({})", t.from, t.to, t.reason))
    .build()?;
    let layer = BreakerLayer::new(breaker.clone()).with_classifier(classify);
    let client = layer.layer(tower::service_fn(move |()| get(addr)));

    for i in 1..=10 {
        if i == 7 {
            println!("  (waiting out the 200 ms cooldown)");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        match client.clone().oneshot(()).await {
            Ok(resp) => println!(
                "call {i:2}: {} {:?}",
                resp.status(),
                String::from_utf8_lossy(resp.body())
            ),
            Err(BreakerError::Rejected(r)) => println!("call {i:2}: rejected locally: {r}"),
            Err(BreakerError::Inner(e)) => println!("call {i:2}: transport error: {e}"),
            Err(e) => println!("call {i:2}: {e}"),
        }
    }
    println!("final state: {:?}", breaker.state());
    server.abort();
    Ok(())
}
