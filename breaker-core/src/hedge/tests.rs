use super::*;
use crate::classify::{from_fn, Outcome};
use std::cell::Cell;
use std::time::Duration;
use tokio::time::{sleep, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Drops when the attempt's future is dropped: a cancelled attempt is observable.
struct OnDrop<'a>(&'a Cell<u32>);
impl Drop for OnDrop<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_fast_first_attempt_sends_no_hedge() {
    let hedge = Hedge::new(HedgePolicy::after(ms(50))).unwrap();
    let calls = Cell::new(0);
    let r: Result<u32, ()> = hedge
        .run(|n| {
            calls.set(calls.get() + 1);
            async move {
                sleep(ms(20)).await;
                Ok(n)
            }
        })
        .await;
    assert_eq!((r, calls.get()), (Ok(0), 1));
}

#[tokio::test(start_paused = true)]
async fn the_first_answer_wins_and_the_others_are_cancelled() {
    let hedge = Hedge::new(HedgePolicy::after(ms(50)).max_hedges(2)).unwrap();
    let dropped = Cell::new(0);
    let start = Instant::now();
    // The first attempt takes 1 s, the first hedge (sent at 50 ms) 500 ms, the second hedge
    // (sent at 100 ms) 30 ms: the second hedge answers at 130 ms.
    let r: Result<u32, ()> = hedge
        .run(|n| {
            let guard = OnDrop(&dropped);
            async move {
                let _guard = guard;
                sleep(ms([1000, 500, 30][n as usize])).await;
                Ok(n)
            }
        })
        .await;
    assert_eq!(r, Ok(2));
    assert_eq!(start.elapsed(), ms(130));
    assert_eq!(
        dropped.get(),
        3,
        "the winner ended, the two losers were dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_sends_the_next_hedge_at_once_and_the_last_failure_is_returned() {
    let hedge = Hedge::new(HedgePolicy::after(ms(50)).max_hedges(2)).unwrap();
    let start = Instant::now();
    let started = std::cell::RefCell::new(Vec::new());
    let r: Result<(), u32> = hedge
        .run(|n| {
            started.borrow_mut().push((n, start.elapsed()));
            async move {
                sleep(ms(10)).await;
                Err(n)
            }
        })
        .await;
    assert_eq!(r, Err(2));
    // Each failure at 10 ms started the next attempt then, not at the 50 ms delay.
    assert_eq!(*started.borrow(), [(0, ms(0)), (1, ms(10)), (2, ms(20))]);
    assert_eq!(start.elapsed(), ms(30));
}

/// An error the classifier ignores (a 404) is an answer: it ends the call, no hedge goes out.
#[tokio::test(start_paused = true)]
async fn an_ignored_error_is_an_answer() {
    let hedge = Hedge::new(HedgePolicy::after(ms(50))).unwrap();
    let class = from_fn(|r: Result<&(), &u16>| match r {
        Err(404) => Outcome::Ignored,
        Err(_) => Outcome::Failure,
        Ok(_) => Outcome::Success,
    });
    let calls = Cell::new(0);
    let r = hedge
        .run_with(&class, |_| {
            calls.set(calls.get() + 1);
            async { Err::<(), u16>(404) }
        })
        .await;
    assert_eq!((r, calls.get()), (Err(404), 1));
}

/// A percentile delay: `max` until 64 attempts completed, then the 90th percentile of recent
/// latencies, clamped.
#[tokio::test(start_paused = true)]
async fn a_percentile_delay_follows_recent_latencies() {
    let hedge = Hedge::new(HedgePolicy::percentile(90.0, ms(5), ms(200))).unwrap();
    assert_eq!(hedge.delay(), ms(200));
    for i in 0..64u64 {
        let _: Result<(), ()> = hedge
            .run(|_| async move {
                sleep(ms(1 + i % 10)).await; // 1..=10 ms, evenly
                Ok(())
            })
            .await;
    }
    assert_eq!(hedge.delay(), ms(9));
    // A slow attempt now gets a hedge after 9 ms.
    let start = Instant::now();
    let r: Result<u32, ()> = hedge
        .run(|n| async move {
            sleep(ms(if n == 0 { 1000 } else { 2 })).await;
            Ok(n)
        })
        .await;
    assert_eq!((r, start.elapsed()), (Ok(1), ms(11)));
}

#[tokio::test(start_paused = true)]
async fn no_hedge_starts_at_or_after_the_enclosing_limit() {
    let hedge = Hedge::new(HedgePolicy::after(ms(50))).unwrap();
    let limit = Instant::now() + ms(50);
    let calls = Cell::new(0);
    let r: Result<u32, ()> = future::Hedged::new(
        hedge.inner(),
        |n| {
            calls.set(calls.get() + 1);
            async move {
                sleep(ms(80)).await;
                Ok(n)
            }
        },
        |_| Verdict::Accept,
        Some(limit),
    )
    .await;
    assert_eq!((r, calls.get()), (Ok(0), 1));
}

/// An attempt refused locally (by a layer inside the hedge: an open breaker, a rate limit,
/// throttling) starts no hedge at once: another would be refused too, and counted by the layer
/// that refused it (throttling saw two requests a call). With nothing else running the call
/// ends with the refusal, at once and after one attempt.
#[tokio::test(start_paused = true)]
async fn a_refused_attempt_starts_no_hedge_at_once() {
    let hedge = Hedge::new(HedgePolicy::after(ms(50))).unwrap();
    let calls = Cell::new(0);
    let start = Instant::now();
    let r: Result<u32, &str> = Hedged::new(
        &hedge.inner,
        |_| {
            calls.set(calls.get() + 1);
            async { Err("refused") }
        },
        |r: &Result<u32, &str>| {
            if r.is_ok() {
                Verdict::Accept
            } else {
                Verdict::Refused
            }
        },
        None,
    )
    .await;
    assert_eq!(r, Err("refused"));
    assert_eq!(calls.get(), 1);
    assert_eq!(start.elapsed(), ms(0));
}
