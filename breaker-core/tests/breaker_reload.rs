//! Reloading a policy with another window shape through `BreakerFactory::set_policy`: each
//! breaker starts a new, empty window of the new shape (issue 12, "found while reading": the
//! striped time window used to keep its original length and bucket count whatever the reload).

use breaker_core::breaker::{BreakerFactory, BreakerPolicy, CircuitBreaker, SlidingWindow, State};
use breaker_core::clock::{Clock, ManualClock};
use std::time::Duration;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn rate(window: SlidingWindow, min_calls: u32) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window,
        min_calls,
        cooldown: secs(30),
        cooldown_max: secs(30),
        ..BreakerPolicy::default()
    }
}

fn time(length: u64, buckets: u32) -> SlidingWindow {
    SlidingWindow::Time {
        length: secs(length),
        buckets,
    }
}

fn factory(policy: BreakerPolicy) -> (BreakerFactory, CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let factory = CircuitBreaker::builder(policy)
        .clock(Clock::manual(&clock))
        .build_factory()
        .unwrap();
    let breaker = factory.create();
    (factory, breaker, clock)
}

fn record(b: &CircuitBreaker, failures: u32, successes: u32) {
    for _ in 0..failures {
        b.try_acquire().unwrap().failure();
    }
    for _ in 0..successes {
        b.try_acquire().unwrap().success();
    }
}

#[test]
fn a_time_window_reloaded_to_a_shorter_one_forgets_after_the_new_length() {
    let (factory, b, clock) = factory(rate(time(10, 10), 100));
    record(&b, 1, 1);
    factory.set_policy(rate(time(2, 2), 100)).unwrap();
    assert_eq!(
        b.snapshot().window.calls,
        0,
        "the window of the new shape starts empty"
    );
    record(&b, 2, 2);
    assert_eq!(b.snapshot().window.calls, 4);
    clock.set(secs(2));
    assert_eq!(
        b.snapshot().window.calls,
        0,
        "2 s later the calls have aged out of the 2 s window"
    );
}

#[test]
fn a_time_window_reloaded_to_another_bucket_count_slides_in_the_new_steps() {
    // Two 5 s buckets, reloaded to ten 1 s buckets over the same 10 s.
    let (factory, b, clock) = factory(rate(time(10, 2), 100));
    factory.set_policy(rate(time(10, 10), 100)).unwrap();
    record(&b, 1, 0); // bucket [0 s, 1 s)
    clock.set(secs(1));
    record(&b, 1, 0); // bucket [1 s, 2 s)
    clock.set(secs(10));
    // In 1 s steps only the first call has aged out; in 5 s steps both would have, together.
    assert_eq!(b.snapshot().window.calls, 1);
    clock.set(secs(11));
    assert_eq!(b.snapshot().window.calls, 0);
}

#[test]
fn a_time_window_reloaded_to_a_count_window_holds_the_last_n_calls_and_trips_on_them() {
    let (factory, b, _clock) = factory(rate(time(10, 10), 100));
    record(&b, 0, 3);
    factory
        .set_policy(rate(SlidingWindow::Count(4), 4))
        .unwrap();
    record(&b, 0, 6);
    let w = b.snapshot().window;
    assert_eq!(
        (w.calls, w.failures),
        (4, 0),
        "a count window of 4 holds 4 calls"
    );
    record(&b, 1, 0);
    assert_eq!(b.state(), State::Closed, "1 of 4");
    record(&b, 1, 0);
    assert_eq!(b.state(), State::Open, "2 of the last 4 calls failed: 50%");
}

#[test]
fn a_count_window_reloaded_to_a_time_window_ages_calls_out() {
    let (factory, b, clock) = factory(rate(SlidingWindow::Count(10), 10));
    record(&b, 2, 2);
    factory.set_policy(rate(time(1, 1), 4)).unwrap();
    assert_eq!(b.snapshot().window.calls, 0);
    record(&b, 1, 2);
    assert_eq!(b.snapshot().window.calls, 3);
    clock.set(secs(1));
    assert_eq!(
        b.snapshot().window.calls,
        0,
        "a 1 s window forgets after 1 s"
    );
    record(&b, 2, 2);
    assert_eq!(b.state(), State::Open, "2 of 4 in the new window: 50%");
}

#[test]
fn a_count_window_reloaded_to_another_count_and_back_starts_empty_each_time() {
    let (factory, b, _clock) = factory(rate(SlidingWindow::Count(10), 10));
    record(&b, 3, 3);
    factory
        .set_policy(rate(SlidingWindow::Count(4), 4))
        .unwrap();
    record(&b, 0, 6);
    assert_eq!(b.snapshot().window.calls, 4);
    factory
        .set_policy(rate(SlidingWindow::Count(10), 10))
        .unwrap();
    assert_eq!(
        b.snapshot().window.calls,
        0,
        "back to the first shape: a new window, not the old calls"
    );
    record(&b, 4, 5);
    assert_eq!(b.state(), State::Closed, "9 calls, below min_calls");
    record(&b, 1, 0);
    assert_eq!(b.state(), State::Open, "5 of 10");
}

#[test]
fn a_reload_that_keeps_the_shape_keeps_the_window() {
    let (factory, b, _clock) = factory(rate(SlidingWindow::Count(10), 10));
    record(&b, 4, 5);
    let mut stricter = rate(SlidingWindow::Count(10), 10);
    stricter.failure_rate_percent = Some(40.0);
    factory.set_policy(stricter).unwrap();
    assert_eq!(
        b.snapshot().window.calls,
        9,
        "same shape: the calls are kept"
    );
    record(&b, 0, 1);
    assert_eq!(
        b.state(),
        State::Open,
        "4 of 10 = 40% under the new threshold"
    );
}

#[test]
fn breakers_created_after_a_reshape_get_the_new_shape() {
    let (factory, _b, clock) = factory(rate(time(10, 10), 100));
    factory
        .set_policy(rate(SlidingWindow::Count(2), 2))
        .unwrap();
    let fresh = factory.create();
    record(&fresh, 0, 5);
    assert_eq!(fresh.snapshot().window.calls, 2);
    clock.set(secs(60));
    assert_eq!(
        fresh.snapshot().window.calls,
        2,
        "a count window does not age"
    );
}

/// Threads that notice a reshape at once all record into the one new window: the store made by
/// the thread that lost the race to install it is dropped, never written (50 rounds, each
/// thread's outcomes counted exactly).
#[test]
fn threads_noticing_a_reshape_at_once_share_one_new_window() {
    for round in 0..50 {
        let (factory, b, _clock) = factory(rate(SlidingWindow::Count(10), 10));
        record(&b, 0, 3);
        factory
            .set_policy(rate(SlidingWindow::Count(1000), 1000))
            .unwrap();
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    start.wait();
                    record(&b, 0, 100);
                });
            }
        });
        assert_eq!(b.snapshot().window.calls, 200, "round {round}");
    }
}
