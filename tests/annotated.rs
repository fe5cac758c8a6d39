//! The public handle of an annotated function's breaker (`breaker::annotated`): looked up by
//! the function's name once it has been called, with listeners registered before its first
//! call attached to it (and to every keyed breaker). On tokio's paused clock.

use breaker::breaker::{State, Transition};
use breaker::{annotated, circuit_breaker, Error};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
struct Down;

#[circuit_breaker(name = "annotated_test_inventory", threshold = 2, cooldown = "10s")]
async fn inventory(fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(7)
    }
}

#[circuit_breaker(name = "annotated_test_hosts", threshold = 1, key = host)]
async fn by_host(host: &str, fail: bool) -> Result<u32, Down> {
    let _ = host;
    if fail {
        Err(Down)
    } else {
        Ok(1)
    }
}

/// The transitions a listener saw, as `(from, to)`.
type Seen = Arc<Mutex<Vec<(State, State)>>>;

fn recorder() -> (Seen, impl Fn(&Transition) + Send + Sync) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    (seen, move |t: &Transition| {
        s.lock().unwrap().push((t.from, t.to))
    })
}

#[tokio::test(start_paused = true)]
async fn listener_registered_before_the_first_call_sees_every_transition() {
    let name = "annotated_test_inventory";
    let (seen, listener) = recorder();
    annotated::on_transition(name, listener).unwrap();
    assert!(
        annotated::breaker(name).is_none(),
        "built on the first call"
    );

    assert_eq!(inventory(false).await.unwrap(), 7);
    let breaker = annotated::breaker(name).expect("built by the first call");
    assert_eq!(breaker.name(), name);
    assert_eq!(breaker.state(), State::Closed);

    for _ in 0..2 {
        assert!(matches!(inventory(true).await, Err(Error::Inner(Down))));
    }
    assert_eq!(breaker.state(), State::Open);
    assert!(matches!(inventory(false).await, Err(Error::Rejected(_))));
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(inventory(false).await.unwrap(), 7);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
        ]
    );

    // The handle is the function's own breaker: forcing it changes what calls see.
    breaker.force_open();
    assert!(matches!(inventory(false).await, Err(Error::Rejected(_))));
    breaker.reset();

    // Too late for a breaker that exists: an error, not a listener that never runs.
    let err = annotated::on_transition(name, |_| {}).unwrap_err();
    assert_eq!(err.name, name);
}

#[tokio::test(start_paused = true)]
async fn keyed_breakers_get_the_listeners_and_are_found_by_key() {
    let name = "annotated_test_hosts";
    let (seen, listener) = recorder();
    annotated::on_transition(name, listener).unwrap();
    assert!(annotated::keyed(name, "a").is_none());

    assert!(matches!(by_host("a", true).await, Err(Error::Inner(Down))));
    assert_eq!(by_host("b", false).await.unwrap(), 1);
    assert_eq!(annotated::keyed(name, "a").unwrap().state(), State::Open);
    assert_eq!(annotated::keyed(name, "b").unwrap().state(), State::Closed);
    assert!(annotated::keyed(name, "c").is_none());
    assert_eq!(*seen.lock().unwrap(), [(State::Closed, State::Open)]);
}

#[circuit_breaker(
    name = "annotated_test_half_percent",
    failure_rate = "0.5%",
    window = 200,
    min_calls = 200
)]
async fn half_percent(fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(2)
    }
}

/// The attribute's `failure_rate` as a string keeps its `%`, so a rate below 1 % can be
/// written (a bare `0.5` is refused at compile time as a ratio: `tests/ui/fail`): one failure
/// in 200 calls trips it.
#[tokio::test(start_paused = true)]
async fn a_failure_rate_string_says_half_a_percent() {
    for _ in 0..199 {
        assert_eq!(half_percent(false).await.unwrap(), 2);
    }
    let breaker = annotated::breaker("annotated_test_half_percent").unwrap();
    assert_eq!(breaker.policy().failure_rate_percent, Some(0.5));
    assert_eq!(breaker.state(), State::Closed);
    assert!(matches!(half_percent(true).await, Err(Error::Inner(Down))));
    assert_eq!(
        breaker.state(),
        State::Open,
        "1 failure in 200 calls is 0.5 %"
    );
}
