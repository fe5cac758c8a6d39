//! A multi-threaded stress test of the state machine with random pauses: threads admit calls,
//! end them at random (success, failure, ignored, dropped), move a shared manual clock and
//! reset the breaker now and then, on a clock that yields the thread at random readings. After
//! every round (all threads joined: no call in flight) it asserts the invariants of the module
//! docs; during a round it asserts the probe bound per half-open generation: at most
//! `half_open_probes` probes in flight admitted within any one probe wait (a held probe past
//! the wait lets one more in, in the same period).
//!
//! Bounded: a fixed number of rounds and operations, and a wall-clock cap that ends the run
//! early on a slow machine (it never waits on the clock).

use super::*;
use crate::clock::MonotonicSource;
use crate::sync::process::{AtomicU64, Ordering as StdOrdering};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ROUNDS: usize = 60;
const THREADS: usize = 4;
const OPS: usize = 150;
const WALL_CAP: Duration = Duration::from_secs(20);

/// xorshift64*: a small deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

thread_local! {
    /// The pausing clock's generator state, per thread.
    static PAUSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0x9e37_79b9_7f4a_7c15) };
}

/// A shared manual clock whose readings pause the reading thread at random (a yield), so other
/// threads run in the middle of a decision.
#[derive(Default)]
struct PausingClock(AtomicU64);

impl MonotonicSource for PausingClock {
    fn now_nanos(&self) -> u64 {
        let pause = PAUSES.with(|state| {
            let mut rng = Rng(state.get());
            let pause = rng.below(3) == 0;
            state.set(rng.0);
            pause
        });
        if pause {
            std::thread::yield_now();
        }
        self.0.load(StdOrdering::SeqCst)
    }
}

/// Probes in flight per half-open generation, as the callers see them: each one's bracket,
/// the clock's readings taken just before and just after its `try_acquire`, in microseconds.
#[derive(Default)]
struct ProbeBook(Mutex<HashMap<u32, Vec<(u64, u64)>>>);

impl ProbeBook {
    /// A probe of `generation` was admitted by a call whose bracket is `before..=after`
    /// (nanoseconds); `wait` is the shortest probe wait (nanoseconds). Checks the documented
    /// bound on the probes in flight: at most `bound` of them admitted within one probe wait.
    ///
    /// The breaker's reading of the admission lies in the bracket, and it measures the wait on
    /// microsecond stamps (`state.rs`), so the check is in whole microseconds (a floor keeps the
    /// bracket: `before / 1000 <= reading / 1000 <= after / 1000`). A set of probes in flight is
    /// surely admitted within one wait when some `start` has every bracket inside
    /// `start..start + wait`: then their readings are, whatever the breaker read, and it may
    /// not hold more than `bound` such probes. Booking order is not admission order (a thread
    /// may be paused between `try_acquire` and its booking while another admits and books a
    /// later probe), so no probe is assumed older than another: each start is a bracket's own
    /// `before`, and a probe counts only if its whole bracket lies in that window.
    fn admitted(&self, generation: u32, before: u64, after: u64, wait: u64, bound: u32) {
        let (before, after, wait) = (before / 1_000, after / 1_000, wait / 1_000);
        let mut m = self.0.lock().unwrap();
        let probes = m.entry(generation).or_default();
        probes.push((before, after));
        for &(start, _) in probes.iter() {
            let within = probes
                .iter()
                .filter(|(b, a)| *b >= start && *a < start + wait)
                .count();
            assert!(
                within <= bound as usize,
                "probe bound: {within} probes of generation {generation} admitted within the \
                 probe wait, bound {bound} (brackets in µs {probes:?}, wait {wait} µs)"
            );
        }
    }

    fn ended(&self, generation: u32, before: u64, after: u64) {
        let (before, after) = (before / 1_000, after / 1_000);
        let mut m = self.0.lock().unwrap();
        let probes = m.get_mut(&generation).unwrap();
        let at = probes.iter().position(|p| *p == (before, after)).unwrap();
        probes.swap_remove(at);
    }
}

fn policies() -> Vec<BreakerPolicy> {
    let ms = Duration::from_millis;
    vec![
        BreakerPolicy {
            consecutive_failures: Some(2),
            cooldown: ms(10),
            cooldown_max: ms(10),
            half_open_probes: 3,
            successes_to_close: 2,
            max_probe_wait: Some(ms(5)),
            ..BreakerPolicy::default()
        },
        BreakerPolicy {
            consecutive_failures: Some(1),
            cooldown: ms(10),
            cooldown_multiplier: 2.0,
            cooldown_max: ms(40),
            cooldown_jitter: 0.5,
            half_open_probes: 2,
            successes_to_close: 1,
            max_probe_wait: None, // the cooldown
            ..BreakerPolicy::default()
        },
        BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            window: SlidingWindow::Time {
                length: ms(20),
                buckets: 4,
            },
            min_calls: 4,
            cooldown: ms(10),
            cooldown_max: ms(10),
            half_open_probes: 1,
            successes_to_close: 1,
            max_probe_wait: Some(ms(3)),
            ..BreakerPolicy::default()
        },
    ]
}

/// One call: admitted or not; a probe is booked while it is in flight (from after its
/// `try_acquire` to before its end, so the book holds only probes the breaker counts in flight);
/// a random pause; a random end.
fn one_call(b: &CircuitBreaker, clock: &PausingClock, book: &ProbeBook, rng: &mut Rng) {
    let (bound, wait) = (
        b.policy().half_open_probes,
        shortest_probe_wait(&b.policy()),
    );
    let before = clock.0.load(StdOrdering::SeqCst);
    let Ok(p) = b.try_acquire() else { return };
    let after = clock.0.load(StdOrdering::SeqCst);
    let generation = p.ticket.generation();
    let probe = p.is_probe();
    if probe {
        book.admitted(generation, before, after, wait, bound);
    }
    if rng.below(4) == 0 {
        std::thread::yield_now();
    }
    if probe {
        book.ended(generation, before, after);
    }
    match rng.below(10) {
        0..=3 => p.success(),
        4..=7 => p.failure(),
        8 => p.ignored(),
        _ => drop(p),
    }
}

/// The shortest probe wait of `p`, nanoseconds (the cooldown of the first opening when no
/// `max_probe_wait` is set: a grown cooldown is longer).
fn shortest_probe_wait(p: &BreakerPolicy) -> u64 {
    p.max_probe_wait.unwrap_or(p.cooldown).as_nanos() as u64
}

/// The longest a breaker of `p` can refuse a call once none is in flight.
fn longest_wait(p: &BreakerPolicy) -> Duration {
    let cooldown = if p.cooldown_multiplier > 1.0 {
        p.cooldown_max
    } else {
        p.cooldown
    };
    cooldown + p.max_probe_wait.unwrap_or(cooldown)
}

#[test]
fn stress_rounds_keep_the_invariants() {
    let started = Instant::now();
    let mut rounds = 0;
    for (pi, policy) in policies().into_iter().enumerate() {
        let clock = Arc::new(PausingClock::default());
        let wait = longest_wait(&policy);
        let b = CircuitBreaker::builder(policy.clone())
            .clock(Clock::custom(clock.clone()))
            .build()
            .unwrap();
        let book = ProbeBook::default();
        for round in 0..ROUNDS {
            if started.elapsed() > WALL_CAP {
                break;
            }
            rounds += 1;
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let (b, clock, book) = (&b, &clock, &book);
                    let seed = (pi * 1_000_003 + round * 1_009 + t * 7 + 1) as u64;
                    s.spawn(move || {
                        PAUSES.with(|state| state.set(seed.wrapping_mul(0x9e37) | 1));
                        let mut rng = Rng(seed);
                        for _ in 0..OPS {
                            one_call(b, clock, book, &mut rng);
                            match rng.below(40) {
                                0 => b.reset(),
                                1..=12 => {
                                    clock.0.fetch_add(rng.below(3_000_000), StdOrdering::SeqCst);
                                }
                                _ => {}
                            }
                        }
                    });
                }
            });
            // No call in flight: the invariants.
            assert!(
                book.0.lock().unwrap().values().all(Vec::is_empty),
                "every probe ended"
            );
            let s = b.snapshot();
            assert!(
                s.state != State::HalfOpen || s.probes_in_flight == 0,
                "exactly-once release: {s:?} (policy {pi}, round {round})"
            );
            if s.state == State::Open {
                let left = s.retry_after.expect("an open breaker knows its deadline");
                assert!(
                    left <= wait,
                    "deadline {left:?} beyond the longest cooldown"
                );
            }
            clock
                .0
                .fetch_add(wait.as_nanos() as u64 + 1_000, StdOrdering::SeqCst);
            match b.try_acquire() {
                Ok(p) => p.success(),
                Err(r) => panic!(
                    "dead end after the longest wait: {r:?}, {:?} (policy {pi}, round {round})",
                    b.snapshot()
                ),
            }
        }
    }
    assert!(rounds >= 3, "at least one round per policy ran");
}
