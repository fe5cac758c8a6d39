use super::*;
use crate::clock::ManualClock;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn aimd(min: u32, max: u32, initial: u32, time: &ManualClock) -> AdaptiveLimiter {
    let policy = AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, min, max).initial(initial);
    AdaptiveLimiter::with_clock(policy, Clock::manual(time)).unwrap()
}

#[test]
fn admits_up_to_the_limit_and_frees_slots_on_drop() {
    let time = ManualClock::new();
    let limiter = aimd(1, 10, 3, &time);
    let a = limiter.try_acquire().unwrap();
    let b = limiter.try_acquire().unwrap();
    let c = limiter.try_acquire().unwrap();
    assert_eq!(
        limiter.try_acquire().unwrap_err(),
        LimitReached {
            limit: 3,
            in_flight: 3
        }
    );
    // A cancelled call frees its slot and moves nothing.
    drop(a);
    assert_eq!((limiter.in_flight(), limiter.limit()), (2, 3));
    let _d = limiter.try_acquire().unwrap();
    drop((b, c));
    assert_eq!((limiter.in_flight(), limiter.limit()), (1, 3));
}

#[test]
fn aimd_grows_by_one_when_used_and_falls_by_its_ratio_on_a_drop() {
    let time = ManualClock::new();
    let limiter = aimd(2, 12, 10, &time);
    // Six calls: a sample counts the calls in flight when it was admitted (1 to 6), and only
    // those admitted with at least half the limit in use raise it: the 5th (5 of 10) and the
    // 6th (6 of 11).
    let permits: Vec<_> = (0..6).map(|_| limiter.try_acquire().unwrap()).collect();
    for p in permits {
        p.success();
    }
    assert_eq!(limiter.limit(), 12);
    limiter.try_acquire().unwrap().success();
    let permits: Vec<_> = (0..12).map(|_| limiter.try_acquire().unwrap()).collect();
    for p in permits {
        p.success();
    }
    assert_eq!(limiter.limit(), 12, "capped at the ceiling");
    // One call alone out of 12: the limit is not needed, so not raised.
    limiter.try_acquire().unwrap().success();
    assert_eq!(limiter.limit(), 12);
    // A failure: 12 × 0.9 = 10.8, rounded down.
    limiter.try_acquire().unwrap().failure();
    assert_eq!(limiter.limit(), 10);
    // An ignored outcome gives no sample.
    limiter.try_acquire().unwrap().record(Outcome::Ignored);
    assert_eq!(limiter.limit(), 10);
}

#[test]
fn aimd_counts_a_slow_call_as_a_drop() {
    let time = ManualClock::new();
    let limiter = aimd(1, 100, 20, &time);
    let p = limiter.try_acquire().unwrap();
    time.advance(ms(5001));
    p.success();
    assert_eq!(limiter.limit(), 18, "20 × 0.9");
    let p = limiter.try_acquire().unwrap();
    time.advance(ms(5000));
    p.success();
    assert_eq!(
        limiter.limit(),
        18,
        "at the bound: not slow, and 1 of 18 is not enough use"
    );
}

/// Rounds of calls that fill the limit and take `latency` each; returns the limit after.
fn rounds(limiter: &AdaptiveLimiter, time: &ManualClock, latency: Duration, n: usize) -> u32 {
    for _ in 0..n {
        let permits: Vec<_> = std::iter::from_fn(|| limiter.try_acquire().ok()).collect();
        time.advance(latency);
        for p in permits {
            p.success();
        }
    }
    limiter.limit()
}

/// The case the layer exists for: while the dependency answers in 10 ms the limit climbs to
/// the ceiling; when it slows to 50 ms the limit falls from 100 to about 11, holding the calls
/// in flight to it down instead of queueing more; when it recovers the limit climbs again.
///
/// Where it settles: a sample moves the estimate `L` to `0.8 L + 0.2 (g L + 4)`, which stands
/// still at `L = 4 / (1 - g)`; after 3 rounds the long-term average has moved about a quarter
/// of the way from 10 ms to 50 ms (an exponential window of 600 samples), so
/// `g = 1.5 × ~21 / 50 ≈ 0.63` and `L ≈ 11`.
#[test]
fn gradient2_holds_concurrency_down_while_the_dependency_is_slow() {
    let time = ManualClock::new();
    let policy = AdaptiveLimitPolicy::new(LimitAlgorithm::GRADIENT2, 5, 100).initial(20);
    let limiter = AdaptiveLimiter::with_clock(policy, Clock::manual(&time)).unwrap();
    assert_eq!(rounds(&limiter, &time, ms(10), 30), 100);
    let slow = rounds(&limiter, &time, ms(50), 3);
    assert!((9..=12).contains(&slow), "limit {slow} after 3 slow rounds");
    // The long-term average learns the new latency, so the limit no longer falls further
    // (it is not a failure, only slower); and it recovers when latency falls back.
    assert_eq!(rounds(&limiter, &time, ms(10), 40), 100);
}

#[test]
fn gradient2_leaves_an_unused_limit_alone() {
    let time = ManualClock::new();
    let policy = AdaptiveLimitPolicy::new(LimitAlgorithm::GRADIENT2, 5, 100).initial(40);
    let limiter = AdaptiveLimiter::with_clock(policy, Clock::manual(&time)).unwrap();
    for latency in [10, 10, 10, 500, 500] {
        let p = limiter.try_acquire().unwrap();
        time.advance(ms(latency));
        p.success();
    }
    assert_eq!(limiter.limit(), 40, "1 call in flight of 40 judges nothing");
}

/// Many threads admitting and releasing at once never hold more slots than the limit.
#[test]
fn admission_never_exceeds_the_limit_under_contention() {
    use std::sync::atomic::AtomicU32;
    let time = ManualClock::new();
    let limiter = aimd(1, 8, 8, &time);
    let peak = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..20_000 {
                    if let Ok(p) = limiter.try_acquire() {
                        peak.fetch_max(limiter.in_flight(), Ordering::Relaxed);
                        drop(p);
                    }
                }
            });
        }
    });
    assert!(peak.load(Ordering::Relaxed) <= 8);
    assert_eq!(limiter.in_flight(), 0);
}
