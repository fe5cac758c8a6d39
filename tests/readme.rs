//! The README's quick-start example, run against a real HTTP server on loopback that answers
//! 503 to everything: the breaker opens on the 5xx responses and the server sees no request
//! once it has (issue 13 §1). `readme_block_is_this_code` keeps the README's text and this code
//! the same.
//!
//! Real time, not tokio's paused clock: the example's 2 s timeout would fire at once on a
//! paused clock while the socket is waited on. The test waits only for the example's own
//! backoff sleeps (a few hundred milliseconds) and asserts counts, not times.
#![cfg(feature = "reqwest")]

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

// README: begin
use breaker::circuit_breaker;
use breaker::http::ResponseExt; // `error_for_status_with_retry_after`

#[circuit_breaker(threshold = 5, cooldown = "30s", retry = "3x exp jitter", timeout = "2s", classify = http)]
async fn get_stock(
    client: &reqwest::Client,
    base: &str,
    sku: &str,
) -> Result<String, reqwest::Error> {
    let response = client.get(format!("{base}/stock/{sku}")).send().await?;
    response.error_for_status_with_retry_after()?.text().await
}
// README: end

/// The README's usage lines, as the body of a function.
async fn readme_usage(client: reqwest::Client, base: &str) {
    // README: begin
    // The rewritten function returns Result<String, breaker::Error<reqwest::Error>>.
    match get_stock(&client, base, "abc").await {
        Ok(body) => println!("{body}"),
        Err(breaker::Error::Rejected(r)) => println!("not called: {r}"), // open breaker: use a fallback
        Err(e) => println!("failed: {e}"),
    }
    // README: end
}

/// A loopback server answering 503 to every request; its base URL and its request count.
async fn down() -> (String, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&hits);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_: Request<Incoming>| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async {
                        let mut resp = Response::new(Full::new(Bytes::from_static(b"down")));
                        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (base, hits)
}

#[tokio::test]
async fn the_readme_example_trips_on_503() {
    let (base, hits) = down().await;
    let client = reqwest::Client::new();
    // 1st call: 3 attempts, 3 failures; it gives up, naming the 503.
    let e = get_stock(&client, &base, "abc").await.unwrap_err();
    assert_eq!(e.attempts(), 3);
    assert_eq!(
        e.inner().and_then(reqwest::Error::status),
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    assert!(e.to_string().contains("503"), "{e}");
    // 2nd call: the 5th failed attempt opens the breaker, so its 3rd attempt is refused.
    let e = get_stock(&client, &base, "abc").await.unwrap_err();
    assert!(matches!(e, breaker::Error::Rejected(_)), "{e:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 5);
    // From then on, calls are refused without a request, the README's usage lines included.
    for _ in 0..10 {
        readme_usage(client.clone(), &base).await;
        assert!(matches!(
            get_stock(&client, &base, "abc").await,
            Err(breaker::Error::Rejected(_))
        ));
    }
    assert_eq!(hits.load(Ordering::SeqCst), 5);
}

/// The first ```` ```rust ```` block of the README after `heading`: its lines trimmed, blank
/// ones left out.
fn readme_block(heading: &str) -> Vec<&'static str> {
    let readme = include_str!("../README.md");
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("the README has {heading:?}"));
    let block = &readme[start..];
    let block = &block[block.find("```rust\n").unwrap() + "```rust\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The lines of `source` between the markers `// {marker}: begin` and `// {marker}: end`
/// (after a doc comment's `//!` where `doc`), trimmed, blank ones left out.
fn marked<'a>(source: &'a str, marker: &str, doc: bool) -> Vec<&'a str> {
    let (begin, end) = (format!("// {marker}: begin"), format!("// {marker}: end"));
    let mut code = Vec::new();
    let mut inside = false;
    for line in source.lines() {
        let line = if doc {
            line.trim_start_matches("//!")
        } else {
            line
        }
        .trim();
        if line == begin {
            inside = true;
        } else if line == end {
            inside = false;
        } else if inside && !line.is_empty() {
            code.push(line);
        }
    }
    code
}

/// The README's quick-start block is this file's code between the `README:` markers, line for
/// line (indentation aside).
#[test]
fn readme_block_is_this_code() {
    assert_eq!(
        readme_block("With the attribute:\n\n```rust\n"),
        marked(include_str!("readme.rs"), "README", false)
    );
}

/// The README's block on sharing breakers is the doc example of `breaker_redis::fleet` (a
/// compiled doc test) between its `README:` markers, line for line; the example runs against
/// a real server in `breaker-redis/tests/redis/fleet.rs`.
#[test]
fn readme_fleet_block_is_the_doc_example() {
    assert_eq!(
        readme_block("## Sharing breakers across replicas"),
        marked(
            include_str!("../breaker-redis/src/fleet/mod.rs"),
            "README",
            true
        )
    );
}

/// Stand-ins for the README's plain-API block: a fetch that answers, a call that fails.
async fn fetch() -> Result<String, std::io::Error> {
    Ok("in stock".to_string())
}

async fn call() -> Result<String, std::io::Error> {
    Err(std::io::Error::other("down"))
}

/// The README's plain-API block, between its markers (compared line for line below; not
/// formatted, so that it stays the README's text).
#[rustfmt::skip]
async fn readme_plain_api(
) -> Result<(Result<String, breaker::Error<std::io::Error>>, Result<String, breaker::Error<std::io::Error>>), Box<dyn std::error::Error>> {
    // README plain: begin
    use breaker::{BreakerPolicy, CircuitBreaker, Pipeline};
    use std::time::Duration;

    let pipeline = Pipeline::builder()
        .name("stock") // the breaker's name in events and metrics
        .breaker_policy(BreakerPolicy { consecutive_failures: Some(5), ..Default::default() })
        .retry(breaker::dsl::parse_retry("3x exp jitter")?)
        .idempotent(true)
        .timeout(Duration::from_secs(2))
        .build()?;
    let body = pipeline.call(|| async { fetch().await }).await;
    // In tests on tokio's paused clock, add `.clock(breaker::Clock::tokio())` so the cooldown
    // follows `tokio::time::advance` (the attribute uses tokio's clock already; the default here
    // is the CPU's monotonic clock, which the paused clock does not move).

    // Or the breaker alone, with RAII permits:
    let breaker = CircuitBreaker::new(BreakerPolicy::default())?;
    let result: Result<String, breaker::Error<std::io::Error>> = match breaker.try_acquire() {
        Ok(permit) => match call().await {
            Ok(v) => { permit.success(); Ok(v) }
            Err(e) => { permit.failure(); Err(breaker::Error::Inner(e)) } // or permit.ignored() for a 404
        },                                           // dropping the permit = cancellation
        Err(rejected) => Err(rejected.into()),       // rejected.retry_after(): rest of the cooldown
    };
    // README plain: end
    Ok((body, result))
}

#[tokio::test]
async fn the_readme_plain_api_block_runs() {
    let (body, result) = readme_plain_api().await.unwrap();
    assert_eq!(body.unwrap(), "in stock");
    assert!(matches!(result, Err(breaker::Error::Inner(e)) if e.to_string() == "down"));
}

/// The README's first block after `heading` is this file's code between the `marker` markers,
/// line for line (indentation and runs of spaces aside).
fn assert_readme_block_is(heading: &str, marker: &str) {
    let squash = |l: &&str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme: Vec<String> = readme_block(heading).iter().map(squash).collect();
    let code: Vec<String> = marked(include_str!("readme.rs"), marker, false)
        .iter()
        .map(squash)
        .collect();
    assert_eq!(readme, code);
}

/// The README's plain-API block is `readme_plain_api`'s code.
#[test]
fn readme_plain_block_is_this_code() {
    assert_readme_block_is(
        "With the plain API (everything the attribute does):\n\n```rust\n",
        "README plain",
    );
}

/// The README's config-file block, between its markers (compared line for line below), run in
/// a folder holding a copy of `examples/breaker.toml` as `breaker.toml`.
#[cfg(feature = "watch")]
#[rustfmt::skip]
fn readme_config_file() -> Result<(), Box<dyn std::error::Error>> {
    use std::time::Duration;
    // README config: begin
    let registry = breaker::config::PolicyRegistry::load(breaker::config::Loader::file("breaker.toml"))?;
    let inventory = registry.get("inventory").unwrap();     // Arc<Policy>, defaults filled in
    let pipeline = registry.pipeline("inventory").unwrap(); // follows reloads, call by call
    registry.reload()?;  // atomic swap; a failed reload keeps the previous policies and says why
    let watch = registry.watch(Duration::from_millis(200))?; // feature `watch`: reload on change
    breaker::config::install(registry)?; // for `policy = ".."` functions: checks them all first
    // README config: end
    assert!(inventory.breaker.is_some() && pipeline.current().breaker().is_some());
    drop(watch);
    Ok(())
}

/// The block runs as written: the example file loads, its `inventory` policy has a breaker,
/// the registry reloads, watches and installs. The working folder is this test's own (no other
/// test of this binary reads a relative path).
#[cfg(feature = "watch")]
#[test]
fn the_readme_config_block_runs() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("breaker-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/breaker.toml"),
        dir.join("breaker.toml"),
    )
    .unwrap();
    std::env::set_current_dir(&dir).unwrap();
    readme_config_file().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README's config-file block is `readme_config_file`'s code.
#[test]
fn readme_config_block_is_this_code() {
    assert_readme_block_is(
        "From a config file (`examples/breaker.toml`",
        "README config",
    );
}

/// The README's block on a rate limit per key, between its markers.
mod keyed_rate {
    // README keyed rate: begin
    use breaker::circuit_breaker;

    // 100 calls a second for each tenant, 20 at once; limiters of at most 10,000 tenants kept.
    #[circuit_breaker(key = tenant, rate = "100/s burst 20 per key", max_keys = 10_000)]
    pub async fn report(tenant: &str) -> Result<String, std::io::Error> {
        Ok(format!("report of {tenant}"))
    }
    // README keyed rate: end
}

/// The block runs as its comment says: tenant `a`'s 21st call at once is refused with the
/// time to its next permit (10 ms), and tenant `b` has its own 20.
#[tokio::test(start_paused = true)]
async fn the_readme_keyed_rate_block_runs() {
    for _ in 0..20 {
        assert_eq!(keyed_rate::report("a").await.unwrap(), "report of a");
    }
    match keyed_rate::report("a").await {
        Err(breaker::Error::Rejected(breaker::Rejection::RateLimited(r))) => {
            assert_eq!(r.retry_after, std::time::Duration::from_millis(10));
        }
        other => panic!("expected a rate-limit rejection, got {other:?}"),
    }
    for _ in 0..20 {
        assert!(keyed_rate::report("b").await.is_ok());
    }
}

/// The README's keyed-rate block is `keyed_rate`'s code.
#[test]
fn readme_keyed_rate_block_is_this_code() {
    assert_readme_block_is("### A rate limit per key", "README keyed rate");
}
