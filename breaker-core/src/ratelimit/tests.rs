use super::*;
use crate::clock::ManualClock;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_burst_then_one_permit_per_interval() {
    let time = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(10).burst(3),
        Clock::manual(&time),
    )
    .unwrap();
    for _ in 0..3 {
        limiter.try_acquire().unwrap();
    }
    assert_eq!(
        limiter.try_acquire(),
        Err(RateLimited {
            retry_after: ms(100),
            waited: Duration::ZERO
        })
    );
    time.advance(ms(40));
    assert_eq!(limiter.try_acquire().unwrap_err().retry_after, ms(60));
    time.advance(ms(60));
    limiter.try_acquire().unwrap();
    // The burst came back one interval at a time: one permit now, none spare.
    assert_eq!(limiter.try_acquire().unwrap_err().retry_after, ms(100));
}

/// GCRA's bound: over any span `w`, at most `burst + w / interval` calls (here 5 + 1000/50 in
/// one second of calls every millisecond).
#[test]
fn admits_exactly_burst_plus_rate_over_a_span() {
    let time = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(20).burst(5),
        Clock::manual(&time),
    )
    .unwrap();
    let mut admitted = 0;
    for _ in 0..=1000 {
        if limiter.try_acquire().is_ok() {
            admitted += 1;
        }
        time.advance(ms(1));
    }
    assert_eq!(admitted, 5 + 20);
}

#[test]
fn a_smooth_limit_spaces_calls_evenly() {
    let time = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(4).burst(1),
        Clock::manual(&time),
    )
    .unwrap();
    limiter.try_acquire().unwrap();
    assert_eq!(limiter.try_acquire().unwrap_err().retry_after, ms(250));
    time.advance(ms(249));
    assert_eq!(
        limiter.try_acquire().unwrap_err().retry_after,
        Duration::from_millis(1)
    );
    time.advance(ms(1));
    limiter.try_acquire().unwrap();
}

#[test]
fn an_invalid_policy_names_every_value() {
    let err = RateLimiter::new(RateLimitPolicy {
        rate: 0,
        per: Duration::from_secs(1),
        burst: 0,
        max_wait: Duration::ZERO,
    })
    .unwrap_err();
    assert_eq!(err.problems.len(), 2);
    assert!(err
        .to_string()
        .starts_with("invalid rate limit: `rate` must be at least 1"));
    assert!(err
        .to_string()
        .ends_with("`burst` must be in 1..=1000000, got 0"));
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_for_the_next_permit_within_max_wait() {
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(10).burst(1).max_wait(ms(150)),
        Clock::tokio(),
    )
    .unwrap();
    let start = tokio::time::Instant::now();
    limiter.acquire().await.unwrap();
    limiter.acquire().await.unwrap();
    assert_eq!(start.elapsed(), ms(100));
    limiter.acquire().await.unwrap();
    assert_eq!(start.elapsed(), ms(200));
}

#[tokio::test(start_paused = true)]
async fn a_permit_later_than_the_wait_is_refused_at_once() {
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(1).burst(1).max_wait(ms(300)),
        Clock::tokio(),
    )
    .unwrap();
    limiter.acquire().await.unwrap();
    let start = tokio::time::Instant::now();
    let refused = limiter.acquire().await.unwrap_err();
    assert_eq!(
        refused,
        RateLimited {
            retry_after: Duration::from_secs(1),
            waited: Duration::ZERO
        }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_shortens_the_wait() {
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(10)
            .burst(1)
            .max_wait(Duration::from_secs(1)),
        Clock::tokio(),
    )
    .unwrap();
    limiter.try_acquire().unwrap();
    let deadline = tokio::time::Instant::now() + ms(50);
    let refused = limiter.acquire_until(Some(deadline)).await.unwrap_err();
    assert_eq!(refused.retry_after, ms(100));
    // Within the deadline: it waits.
    let deadline = tokio::time::Instant::now() + ms(100);
    limiter.acquire_until(Some(deadline)).await.unwrap();
}

/// Two waiters for one permit: the first to wake takes it, the other waits for the next one
/// (each retries at the instant its permit was due; none is lost).
#[tokio::test(start_paused = true)]
async fn concurrent_waiters_each_get_a_later_permit() {
    let limiter = RateLimiter::with_clock(
        RateLimitPolicy::per_second(10)
            .burst(1)
            .max_wait(Duration::from_secs(1)),
        Clock::tokio(),
    )
    .unwrap();
    limiter.try_acquire().unwrap();
    let start = tokio::time::Instant::now();
    let (a, b) = tokio::join!(
        async {
            limiter.acquire().await.unwrap();
            start.elapsed()
        },
        async {
            limiter.acquire().await.unwrap();
            start.elapsed()
        }
    );
    let mut got = [a, b];
    got.sort();
    assert_eq!(got, [ms(100), ms(200)]);
}

/// "waited 0ns" only said that no wait was configured: the wait is shown when there was one.
#[test]
fn a_rejection_shows_its_wait_only_when_it_waited() {
    let at_once = RateLimited {
        retry_after: Duration::from_micros(199_990),
        waited: Duration::ZERO,
    };
    assert_eq!(at_once.to_string(), "rate limited: next permit in 199.99ms");
    let after_a_wait = RateLimited {
        retry_after: ms(5),
        waited: ms(35),
    };
    assert_eq!(
        after_a_wait.to_string(),
        "rate limited: next permit in 5ms (waited 35ms)"
    );
    let full = crate::bulkhead::BulkheadFull {
        max_concurrent: 8,
        waited: ms(50),
    };
    assert_eq!(
        full.to_string(),
        "bulkhead full: 8 calls in flight (waited 50ms)"
    );
}
