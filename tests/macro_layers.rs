//! `#[circuit_breaker]` with a rate limit, hedging, an adaptive limit and a breaker: the
//! policy compiles, and each layer acts in the declared order (the default:
//! `breaker > hedge > rate > adaptive > timeout`). On tokio's paused clock.

use breaker::circuit_breaker;
use breaker::{Error, Rejection};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::{sleep, Instant};

#[derive(Debug, Clone, PartialEq)]
struct Down;

static STARTED: AtomicU32 = AtomicU32::new(0);

/// The first attempt of each call hangs for 10 s; a hedge answers in 20 ms.
#[circuit_breaker(
    threshold = 3,
    name = "layers_search",
    rate = "1/s burst 2",
    hedge = "1x after 50ms",
    adaptive = "aimd 1..10 from 4",
    timeout = "1s"
)]
async fn search(call: u32) -> Result<u32, Down> {
    let attempt = STARTED.fetch_add(1, Ordering::SeqCst);
    sleep(Duration::from_millis(if attempt % 2 == 0 {
        10_000
    } else {
        20
    }))
    .await;
    Ok(call)
}

#[tokio::test(start_paused = true)]
async fn rate_hedge_adaptive_and_breaker_act_in_the_declared_order() {
    // Hedge inside the breaker, timeout inside the hedge: the hedge sent at 50 ms answers at
    // 70 ms, long before the first attempt's timeout of 1 s.
    let start = Instant::now();
    assert_eq!(search(1).await, Ok(1));
    assert_eq!(start.elapsed(), Duration::from_millis(70));
    assert_eq!(STARTED.load(Ordering::SeqCst), 2);
    // The rate limit is inside the hedge: each attempt takes a permit, and the burst of 2
    // went to the two attempts of call 1. Call 2 finds none and is refused with the time to
    // the next permit (due at 1 s, 930 ms from now), without calling the function.
    let err = search(2).await.unwrap_err();
    match err {
        Error::Rejected(Rejection::RateLimited(r)) => {
            assert_eq!(r.retry_after, Duration::from_millis(930));
        }
        other => panic!("expected a rate-limit rejection, got {other:?}"),
    }
    assert_eq!(STARTED.load(Ordering::SeqCst), 2);
    // The breaker is outside the hedge: one permit per call, whatever the hedges. It saw one
    // success, and the rate limit's refusal as ignored (not the dependency's failure).
    let breaker = breaker::annotated::breaker("layers_search").unwrap();
    let totals = breaker.snapshot().totals.unwrap();
    assert_eq!(
        (
            totals.admitted,
            totals.succeeded,
            totals.ignored,
            totals.failed
        ),
        (2, 1, 1, 0)
    );
    assert_eq!(breaker.state(), breaker::State::Closed);
}

// ---------------------------------------------------------------------------------------------
// A rate limit per key: one limiter per tenant from a bounded registry (`max_keys`)

static TENANT_CALLS: AtomicU32 = AtomicU32::new(0);

/// Two permits an hour per tenant, at most two tenants' breakers and limiters at once.
#[circuit_breaker(
    key = tenant,
    rate = "1/1h burst 2 per key",
    max_keys = 2,
    key_idle = "1m",
    name = "layers_per_tenant"
)]
async fn per_tenant(tenant: &str) -> Result<u32, Down> {
    let _ = tenant;
    Ok(TENANT_CALLS.fetch_add(1, Ordering::SeqCst))
}

/// A rate limit not `per key`: one limit for the function, whatever the key.
#[circuit_breaker(key = tenant, rate = "1/s burst 2", name = "layers_shared_rate")]
async fn shared_rate(tenant: &str) -> Result<(), Down> {
    let _ = tenant;
    Ok(())
}

fn rate_limited<T: std::fmt::Debug>(r: Result<T, Error<Down>>) -> Duration {
    match r {
        Err(Error::Rejected(Rejection::RateLimited(r))) => r.retry_after,
        other => panic!("expected a rate-limit rejection, got {other:?}"),
    }
}

fn keys_full<T: std::fmt::Debug>(r: Result<T, Error<Down>>) -> breaker::layer::Layer {
    match r {
        Err(Error::Rejected(rejection @ Rejection::Keys(full))) => {
            assert_eq!((full.max_keys(), full.name()), (2, "layers_per_tenant"));
            assert_eq!(rejection.layer(), full.layer());
            full.layer()
        }
        other => panic!("expected a full registry of keys, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_per_key_gives_each_key_its_own_limit_from_a_bounded_registry() {
    use breaker::layer::Layer;
    const HOUR: Duration = Duration::from_secs(3600);
    // Each tenant has its own burst of 2: a's third call is refused, b is not affected.
    assert!(per_tenant("a").await.is_ok());
    assert!(per_tenant("a").await.is_ok());
    assert_eq!(rate_limited(per_tenant("a").await), HOUR);
    assert!(per_tenant("b").await.is_ok());
    assert!(per_tenant("b").await.is_ok());
    assert_eq!(TENANT_CALLS.load(Ordering::SeqCst), 4);
    // A third tenant: the keys' breakers were used within `key_idle`, so their registry is
    // full.
    assert_eq!(keys_full(per_tenant("c").await), Layer::Breaker);
    // Past `key_idle` the breakers are idle and closed (one makes room for c's), but the
    // limiters have not refilled (3 h at 1/h for a burst of 2): evicting one would give its
    // tenant a fresh burst, so the limiters' registry refuses c.
    tokio::time::advance(Duration::from_secs(120)).await;
    assert_eq!(keys_full(per_tenant("c").await), Layer::RateLimit);
    assert_eq!(TENANT_CALLS.load(Ordering::SeqCst), 4);
    // Refilled: c takes an idle limiter's place, with its own burst of 2.
    tokio::time::advance(3 * HOUR).await;
    assert!(per_tenant("c").await.is_ok());
    assert!(per_tenant("c").await.is_ok());
    assert_eq!(rate_limited(per_tenant("c").await), HOUR);
    assert_eq!(TENANT_CALLS.load(Ordering::SeqCst), 6);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_not_per_key_is_shared_by_every_key() {
    assert!(shared_rate("a").await.is_ok());
    assert!(shared_rate("b").await.is_ok());
    // The burst of 2 is spent, by two different keys.
    assert_eq!(rate_limited(shared_rate("c").await), Duration::from_secs(1));
}
