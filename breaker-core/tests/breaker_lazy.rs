//! Lazy recovery: breakers own no task, thread or timer. 10,000 breakers are tripped, wait out
//! their cooldown on tokio's paused clock and recover, and the runtime never has a task alive.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_core::clock::Clock;
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn ten_thousand_breakers_leave_no_task_alive() {
    let handle = tokio::runtime::Handle::current();
    let factory = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(2),
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    })
    .clock(Clock::tokio())
    .build_factory()
    .unwrap();
    let breakers: Vec<_> = (0..10_000).map(|_| factory.create()).collect();
    for b in &breakers {
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure();
    }
    assert!(breakers.iter().all(|b| b.state() == State::Open));
    assert_eq!(handle.metrics().num_alive_tasks(), 0);

    tokio::time::advance(Duration::from_secs(30)).await;
    // Nothing happened by itself: recovery is decided by the next call.
    assert!(breakers.iter().all(|b| b.state() == State::Open));
    for b in &breakers {
        b.try_acquire().expect("probe after the cooldown").success();
    }
    assert!(breakers.iter().all(|b| b.state() == State::Closed));
    assert_eq!(handle.metrics().num_alive_tasks(), 0);
}
