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
        per_key: false,
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

mod keyed {
    use crate::clock::{Clock, ManualClock};
    use crate::layer::Layer;
    use crate::ratelimit::{RateLimitPolicy, RateLimiters};
    use std::time::Duration;

    /// One permit a second, a burst of 5: refilled 6 s after the last permit.
    fn limiters(time: &ManualClock, max_keys: usize) -> RateLimiters<String> {
        RateLimiters::builder(RateLimitPolicy::per_second(1).burst(5))
            .clock(Clock::manual(time))
            .name("tenants")
            .max_keys(max_keys)
            .idle_ttl(Duration::from_secs(1))
            .build()
            .unwrap()
    }

    fn admitted(limiters: &RateLimiters<String>, key: &str, calls: usize) -> usize {
        let limiter = limiters.get_or_create(key).unwrap();
        (0..calls).filter(|_| limiter.try_acquire().is_ok()).count()
    }

    #[test]
    fn each_key_has_its_own_limit_from_one_policy() {
        let time = ManualClock::new();
        let l = limiters(&time, 100);
        assert_eq!(admitted(&l, "a", 10), 5);
        assert_eq!(admitted(&l, "a", 10), 0);
        assert_eq!(admitted(&l, "b", 10), 5);
        assert_eq!(l.len(), 2);
        assert_eq!(l.policy(), RateLimitPolicy::per_second(1).burst(5));
        time.advance(Duration::from_secs(2));
        assert_eq!(admitted(&l, "a", 10), 2);
    }

    #[test]
    fn try_acquire_limits_a_key_in_place_and_refuses_a_new_key_of_a_full_registry() {
        use crate::error::Rejection;
        let time = ManualClock::new();
        let l = limiters(&time, 1);
        let admitted = (0..10).filter(|_| l.try_acquire("a").is_ok()).count();
        assert_eq!(admitted, 5);
        match l.try_acquire("a") {
            Err(Rejection::RateLimited(r)) => assert_eq!(r.retry_after, Duration::from_secs(1)),
            other => panic!("expected a rate-limit rejection, got {other:?}"),
        }
        match l.try_acquire("b") {
            Err(Rejection::Keys(full)) => assert_eq!(full.layer(), Layer::RateLimit),
            other => panic!("expected a full registry, got {other:?}"),
        }
        // No handle was handed out: `a` is evictable once idle and refilled.
        time.advance(Duration::from_secs(60));
        assert_eq!(l.evict_idle(), 1);
        assert!(l.try_acquire("b").is_ok());
    }

    #[test]
    fn eviction_never_gives_a_key_a_fresh_burst() {
        let time = ManualClock::new();
        let l = limiters(&time, 100);
        assert_eq!(admitted(&l, "a", 10), 5);
        // Idle past the TTL (1 s, read at 17/16) but not refilled (6 s): kept, so the key
        // gets back only what 3 s of its rate gives, not a new burst of 5.
        time.advance(Duration::from_secs(3));
        assert_eq!(l.evict_idle(), 0);
        assert_eq!(l.len(), 1);
        assert_eq!(admitted(&l, "a", 10), 3);
        // Refilled: a new limiter would admit the same, so it goes.
        time.advance(Duration::from_secs(7));
        assert_eq!(l.evict_idle(), 1);
        assert!(l.get("a").is_none());
        assert_eq!(admitted(&l, "a", 10), 5);
    }

    #[test]
    fn a_held_limiter_is_kept_and_a_full_registry_refuses_new_keys() {
        let time = ManualClock::new();
        let l = limiters(&time, 2);
        assert_eq!(admitted(&l, "a", 1), 1);
        let held = l.get_or_create("b").unwrap();
        let full = l.get_or_create("c").unwrap_err();
        assert_eq!(
            (full.max_keys(), full.name(), full.layer()),
            (2, "tenants", Layer::RateLimit)
        );
        assert_eq!(
            full.to_string(),
            "rate limiter registry is full: 2 keys, none of them idle with its whole burst back"
        );
        time.advance(Duration::from_secs(60));
        // `a` is idle and refilled: a new key takes its place; `b` is held.
        assert!(l.get_or_create("c").is_ok());
        assert!(l.get("a").is_none());
        assert!(l.get("b").is_some());
        drop(held);
        assert_eq!(l.len(), 2);
    }
}
