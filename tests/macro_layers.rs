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
