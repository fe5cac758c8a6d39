//! Retry, timeout and fallback cases BR-32, BR-34, BR-35, BR-45 and BR-46, on tokio's paused
//! clock.

use breaker_core::breaker::{BreakerPolicy, State};
use breaker_core::bulkhead::{Bulkhead, BulkheadPolicy};
use breaker_core::classify::Outcome;
use breaker_core::clock::Clock;
use breaker_core::pipeline::{classifier, FallbackOn, Pipeline};
use breaker_core::retry::{Backoff, GiveUpReason, Jitter, RetryPolicy};
use breaker_core::timeout::TimeoutKind;
use breaker_core::{Error, Rejection};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

#[path = "support/events.rs"]
mod events;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// BR-32: no backoff sleep may end past the total deadline. Attempts at 0, 1, 3, 7 and 12 s;
/// the next 5 s delay would end at 17 s > 15 s, so the call ends at 12 s with "retry budget
/// exhausted".
#[tokio::test(start_paused = true)]
async fn br_32_no_sleep_past_deadline() {
    let p = Pipeline::builder()
        .retry(RetryPolicy {
            max_attempts: 100,
            backoff: Backoff::Exponential {
                base: secs(1),
                factor: 2.0,
                max: secs(5),
            },
            jitter: Jitter::None,
        })
        .idempotent(true)
        .deadline(secs(15))
        .build()
        .unwrap();
    let start = Instant::now();
    let starts = Mutex::new(Vec::new());
    let e = p
        .call(|| {
            starts.lock().unwrap().push(start.elapsed());
            async { Err::<(), _>("transient") }
        })
        .await
        .unwrap_err();
    assert_eq!(
        *starts.lock().unwrap(),
        [secs(0), secs(1), secs(3), secs(7), secs(12)]
    );
    assert_eq!(start.elapsed(), secs(12));
    assert_eq!(e.attempts(), 5);
    assert_eq!(
        e.give_up_reason(),
        Some(GiveUpReason::DeadlineExhausted {
            next_delay: secs(5),
            remaining: secs(3),
        })
    );
    assert!(e.to_string().contains("retry budget exhausted"), "{e}");
    assert_eq!(e.into_inner(), Some("transient"));
}

#[derive(Debug, PartialEq)]
struct Status(u16, Option<Duration>);

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "status {}", self.0)
    }
}

fn http_like() -> impl breaker_core::pipeline::ErrorClassifier<Status> {
    classifier(
        |s: &Status| match s.0 {
            500.. | 408 | 429 => Outcome::Failure,
            _ => Outcome::Ignored,
        },
        |s: &Status| matches!(s.0, 500..|408| 429),
    )
    .retry_after(|s: &Status| s.1)
}

/// BR-34: a Retry-After longer than the remaining budget fails at once with "required delay
/// exceeds remaining budget", not a generic timeout, and without sleeping.
#[tokio::test(start_paused = true)]
async fn br_34_retry_after_beyond_budget_fails_at_once() {
    let p = Pipeline::builder()
        .retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .idempotent(true)
        .deadline(secs(30))
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let e = p
        .call_with(&http_like(), || {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(ms(100)).await;
                Err::<(), _>(Status(429, Some(secs(60))))
            }
        })
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), ms(100));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(e.timeout(), None, "not reported as a timeout");
    assert_eq!(
        e.give_up_reason(),
        Some(GiveUpReason::RetryAfterExceedsBudget {
            required: secs(60),
            remaining: ms(29_900),
        })
    );
    assert!(
        e.to_string()
            .contains("required delay exceeds remaining budget"),
        "{e}"
    );
    assert_eq!(e.inner(), Some(&Status(429, Some(secs(60)))));
}

/// BR-34, the other half: a Retry-After that fits the budget is honoured exactly, even beyond
/// the backoff's cap (10 s here).
#[tokio::test(start_paused = true)]
async fn br_34_retry_after_within_budget_is_honoured_beyond_max_delay() {
    let p = Pipeline::builder()
        .retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .idempotent(true)
        .deadline(secs(30))
        .build()
        .unwrap();
    let start = Instant::now();
    let starts = Mutex::new(Vec::new());
    let r = p
        .call_with(&http_like(), || {
            let n = {
                let mut s = starts.lock().unwrap();
                s.push(start.elapsed());
                s.len()
            };
            async move {
                tokio::time::sleep(ms(100)).await;
                if n == 1 {
                    Err(Status(503, Some(secs(20))))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(*starts.lock().unwrap(), [secs(0), ms(20_100)]);
}

/// BR-35: a non-idempotent operation is never retried. A pipeline with "3x exp" and a 1 s
/// attempt timeout that is not declared idempotent is refused when built (it used to build
/// and silently make one attempt); declaring it idempotent opts in to 3 attempts.
#[tokio::test(start_paused = true)]
async fn br_35_non_idempotent_is_never_retried() {
    let builder = || {
        Pipeline::builder()
            .retry(RetryPolicy {
                max_attempts: 3,
                ..RetryPolicy::default()
            })
            .timeout(secs(1))
            .seed(35)
    };
    let e = builder().idempotent(false).build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid retry policy: `max_attempts`: 3 attempts, but only operations declared \
         idempotent are retried and this pipeline is not; call `.idempotent(true)` on the \
         builder, or remove the retry"
    );
    let p = builder().idempotent(true).build().unwrap();
    let calls = AtomicU32::new(0);
    let e = p
        .call(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(secs(5)).await;
                Ok::<(), &str>(())
            }
        })
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(e.give_up_reason(), Some(GiveUpReason::AttemptsExhausted));
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
}

/// BR-35 on the plain builder: a retry whose operation was never declared idempotent is
/// refused like one declared not idempotent, as a config file refuses a retry without
/// `idempotent = true` (it used to build, make one attempt per call and only log a warning).
/// A retry of one attempt never runs again, so it needs no declaration.
#[test]
fn br_35_a_retry_never_declared_idempotent_is_refused_not_warned_of() {
    let retry = RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    };
    let warnings = events::Capture::new(|m| *m.level() <= tracing::Level::WARN);
    tracing::subscriber::with_default(warnings.clone(), || {
        let unstated = Pipeline::builder()
            .name("orders")
            .retry(retry)
            .build()
            .unwrap_err();
        let stated = Pipeline::builder()
            .retry(retry)
            .idempotent(false)
            .build()
            .unwrap_err();
        assert_eq!(unstated.to_string(), stated.to_string());
        assert!(
            unstated.to_string().contains("call `.idempotent(true)`"),
            "{unstated}"
        );
        Pipeline::builder()
            .retry(retry)
            .idempotent(true)
            .build()
            .unwrap();
        Pipeline::builder()
            .retry(RetryPolicy {
                max_attempts: 1,
                ..RetryPolicy::default()
            })
            .build()
            .unwrap();
        assert_eq!(warnings.take(), Vec::<String>::new());
    });
}

#[derive(Debug, PartialEq)]
enum ApiError {
    NotFound,
    Transport,
}

/// BR-45: the fallback never sees an error classified as ignored; it runs once for a failure
/// and once for a rejection while open.
#[tokio::test(start_paused = true)]
async fn br_45_fallback_never_called_for_ignored_errors() {
    let p = Pipeline::builder()
        .totals(true)
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(1),
            cooldown: secs(30),
            cooldown_max: secs(30),
            ..BreakerPolicy::default()
        })
        .clock(Clock::tokio())
        .fallback_on(FallbackOn::RejectionOrFailure)
        .build()
        .unwrap();
    let class = classifier(
        |e: &ApiError| match e {
            ApiError::NotFound => Outcome::Ignored,
            ApiError::Transport => Outcome::Failure,
        },
        |e: &ApiError| *e == ApiError::Transport,
    );
    let fallbacks = AtomicU32::new(0);
    let calls = AtomicU32::new(0);
    let run = |err: ApiError| {
        let err = Mutex::new(Some(err));
        let (calls, fallbacks, p, class) = (&calls, &fallbacks, &p, &class);
        async move {
            p.call_with_fallback(
                class,
                || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let e = err.lock().unwrap().take().unwrap();
                    async move { Err::<&str, _>(e) }
                },
                |_e| async {
                    fallbacks.fetch_add(1, Ordering::SeqCst);
                    Ok("fallback")
                },
            )
            .await
        }
    };
    let b = p.breaker().unwrap();

    // NotFound reaches the caller unchanged; no fallback; the breaker counts nothing.
    let r = run(ApiError::NotFound).await;
    assert!(matches!(r, Err(Error::Inner(ApiError::NotFound))));
    assert_eq!(fallbacks.load(Ordering::SeqCst), 0);
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Closed);
    assert_eq!(snap.consecutive_failures, 0);
    let t = snap.totals.unwrap();
    assert_eq!((t.failed, t.ignored), (0, 1));

    // A transport error: the fallback once, and the breaker trips (1 consecutive failure).
    assert_eq!(run(ApiError::Transport).await.unwrap(), "fallback");
    assert_eq!(fallbacks.load(Ordering::SeqCst), 1);
    assert_eq!(b.state(), State::Open);

    // A rejection while open: the fallback once, the operation not called.
    let before = calls.load(Ordering::SeqCst);
    assert_eq!(run(ApiError::Transport).await.unwrap(), "fallback");
    assert_eq!(fallbacks.load(Ordering::SeqCst), 2);
    assert_eq!(calls.load(Ordering::SeqCst), before);

    // With FallbackOn::Rejection, a failure is returned as is.
    let strict = Pipeline::builder()
        .totals(true)
        .fallback_on(FallbackOn::Rejection)
        .build()
        .unwrap();
    let e = Error::<ApiError>::Inner(ApiError::Transport);
    assert!(!strict.wants_fallback(&e, &class));
    assert!(p.wants_fallback(&e, &class));
    let rejected = p
        .call(|| async { Ok::<(), ApiError>(()) })
        .await
        .unwrap_err();
    assert!(matches!(rejected, Error::Rejected(Rejection::Breaker(_))));
    assert!(strict.wants_fallback(&rejected, &class));
}

/// BR-46: at the attempt timeout the inner future is dropped: its side effect never happens,
/// and the breaker permit and bulkhead slot around it are released (the breaker records a
/// failure, not a hung call).
#[tokio::test(start_paused = true)]
async fn br_46_timeout_drops_the_inner_future() {
    let bulkhead = Bulkhead::new(BulkheadPolicy {
        max_concurrent: 1,
        max_wait: Duration::ZERO,
    })
    .unwrap();
    let p = Pipeline::builder()
        .totals(true)
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(1),
            cooldown: secs(5),
            cooldown_max: secs(5),
            ..BreakerPolicy::default()
        })
        .clock(Clock::tokio())
        .bulkhead(bulkhead.clone())
        .timeout(secs(1))
        .build()
        .unwrap();
    let flag = AtomicBool::new(false);
    let side_effects = AtomicU32::new(0);
    let slow = || async {
        tokio::time::sleep(secs(5)).await;
        flag.store(true, Ordering::SeqCst);
        side_effects.fetch_add(1, Ordering::SeqCst);
        Ok::<(), &str>(())
    };
    let start = Instant::now();
    let e = p.call(slow).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(1));
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
    assert_eq!(bulkhead.available(), 1);
    let b = p.breaker().unwrap();
    let t = b.snapshot().totals.unwrap();
    assert_eq!((t.admitted, t.failed, t.cancelled), (1, 1, 0));
    assert_eq!(b.state(), State::Open);

    // A half-open probe that times out is released too: the breaker re-opens instead of
    // wedging with a probe slot taken.
    tokio::time::advance(secs(5)).await;
    let e = p.call(slow).await.unwrap_err();
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Open);
    assert_eq!(snap.probes_in_flight, 0);

    tokio::time::advance(secs(10)).await;
    assert!(!flag.load(Ordering::SeqCst));
    assert_eq!(side_effects.load(Ordering::SeqCst), 0);
    assert_eq!(bulkhead.available(), 1);
}
