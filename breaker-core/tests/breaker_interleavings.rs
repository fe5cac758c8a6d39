//! Deterministic interleavings of the breaker's transitions: **no dead end** whatever the
//! order (issue "never wedged").
//!
//! A [`ParkingClock`] parks one chosen thread at its `n`-th clock read, on a real thread; while
//! it is parked the test thread changes the breaker (a probe fails, a reset, a new trip, ...),
//! then lets it go. Each test runs its scenario once for every clock read the parked caller
//! makes (`n` = 1, 2, ... until the caller finishes without reaching its `n`-th read), so
//! whichever point of a transition reads the clock (before or after its compare-and-swap), the
//! other thread gets to run there. There is one test per transition that writes after its
//! compare-and-swap: open -> half-open promotion, a probe slot reservation, the expired-probe
//! takeover, a probe failure that re-opens, a trip, a manual change and half-open -> closed.
//! Channels order the threads; nothing sleeps (the only timeout is a guard against a test that
//! would hang).
//!
//! After each interleaving, with no call in flight, the test checks the invariants:
//! - *no dead end*: once the longest cooldown plus the probe wait has passed, the next call is
//!   admitted (as a probe or closed);
//! - *probe bound*: never more probes in flight than `half_open_probes`;
//! - the entry stamp belongs to the state in force: `time_in_state` counts from the last
//!   transition event.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State, Transition};
use breaker_core::clock::{Clock, MonotonicSource};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

/// How long the test thread waits for the parked thread to arrive before it calls the test
/// hung. Not a sleep: the wait ends as soon as the thread arrives.
const GUARD: Duration = Duration::from_secs(60);

enum Event {
    Parked,
    Finished,
}

struct Target {
    thread: ThreadId,
    /// Readings to let through before parking.
    skip: usize,
    events: mpsc::Sender<Event>,
    resume: mpsc::Receiver<()>,
}

/// A manual clock that parks one armed thread at its `n`-th reading until the test resumes it.
#[derive(Default)]
struct ParkingClock {
    nanos: AtomicU64,
    target: Mutex<Option<Target>>,
}

impl ParkingClock {
    fn advance(&self, by: Duration) {
        self.nanos.fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

impl MonotonicSource for ParkingClock {
    fn now_nanos(&self) -> u64 {
        let me = thread::current().id();
        let target = {
            let mut t = self.target.lock().unwrap();
            match t.as_mut() {
                Some(target) if target.thread == me && target.skip > 0 => {
                    target.skip -= 1;
                    None
                }
                Some(target) if target.thread == me => t.take(),
                _ => None,
            }
        };
        if let Some(t) = target {
            t.events.send(Event::Parked).unwrap();
            // An error means the test thread panicked: carry on and let the test fail there.
            let _ = t.resume.recv();
        }
        self.nanos.load(Ordering::SeqCst)
    }
}

/// Runs `caller` on its own thread. Once it calls `arm`, its `read`-th clock reading (from 1)
/// parks it; then `meanwhile` runs on this thread, the caller is resumed, and its result is
/// returned. `None` if the caller finished before that reading (`meanwhile` did not run).
fn interleave<T: Send>(
    clock: &ParkingClock,
    read: usize,
    caller: impl FnOnce(&dyn Fn()) -> T + Send,
    meanwhile: impl FnOnce(),
) -> Option<T> {
    let (events_tx, events) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel::<()>();
    // `move`: if `meanwhile` panics, `resume_tx` is dropped while unwinding, which wakes the
    // parked caller instead of leaving the scope waiting for it forever.
    thread::scope(move |s| {
        let done = events_tx.clone();
        let target = Mutex::new(Some((events_tx, resume_rx)));
        let handle = s.spawn(move || {
            let arm = || {
                let (events, resume) = target.lock().unwrap().take().expect("armed once");
                *clock.target.lock().unwrap() = Some(Target {
                    thread: thread::current().id(),
                    skip: read - 1,
                    events,
                    resume,
                });
            };
            let out = caller(&arm);
            clock.target.lock().unwrap().take();
            let _ = done.send(Event::Finished);
            out
        });
        match events.recv_timeout(GUARD) {
            Ok(Event::Parked) => {}
            Ok(Event::Finished) => {
                drop(handle.join().unwrap());
                return None;
            }
            Err(e) => panic!("the caller neither parked nor finished: {e}"),
        }
        meanwhile();
        resume_tx.send(()).unwrap();
        Some(handle.join().unwrap())
    })
}

/// Runs `scenario(read)` for read = 1, 2, ... until it reports (with `None`) that the caller
/// finished before that clock reading.
fn at_every_clock_read(mut scenario: impl FnMut(usize) -> Option<()>) {
    let mut read = 1;
    while scenario(read).is_some() {
        read += 1;
        assert!(read < 20, "the caller keeps reading the clock");
    }
    assert!(read > 1, "the caller never read the clock after arming");
}

const COOLDOWN: Duration = Duration::from_secs(10);
const PROBE_WAIT: Duration = Duration::from_secs(3);

fn policy(probes: u32, successes_to_close: u32) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown: COOLDOWN,
        cooldown_max: COOLDOWN,
        half_open_probes: probes,
        successes_to_close,
        max_probe_wait: Some(PROBE_WAIT),
        ..BreakerPolicy::default()
    }
}

struct Rig {
    clock: Arc<ParkingClock>,
    breaker: CircuitBreaker,
    events: Arc<Mutex<Vec<Transition>>>,
    probes: u32,
}

fn rig(policy: BreakerPolicy) -> Rig {
    let clock = Arc::new(ParkingClock::default());
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let probes = policy.half_open_probes;
    let breaker = CircuitBreaker::builder(policy)
        .clock(Clock::custom(clock.clone()))
        .on_transition(move |t| sink.lock().unwrap().push(t.clone()))
        .build()
        .unwrap();
    Rig {
        clock,
        breaker,
        events,
        probes,
    }
}

impl Rig {
    fn trip(&self) {
        self.breaker.try_acquire().expect("closed").failure();
        assert_eq!(self.breaker.state(), State::Open);
    }

    /// Trips, lets the cooldown pass and returns the first probe.
    fn half_open(&self) -> breaker_core::Permit<'_> {
        self.trip();
        self.clock.advance(COOLDOWN);
        let p = self.breaker.try_acquire().expect("the first probe");
        assert!(p.is_probe());
        p
    }

    /// The invariants, with no call in flight. Every violation is reported, not only the first.
    fn check(&self) {
        let mut broken = Vec::new();
        let s = self.breaker.snapshot();
        if s.probes_in_flight != 0 {
            broken.push(format!(
                "no call is in flight, yet {} probe slots are held",
                s.probes_in_flight
            ));
        }
        // The entry stamp belongs to the state in force. (Listeners of transitions won by
        // different threads may run in either order, so look the event up by generation.)
        let entered = self
            .events
            .lock()
            .unwrap()
            .iter()
            .find(|t| t.generation == s.generation)
            .cloned();
        self.clock.advance(Duration::from_secs(1));
        match entered {
            None => broken.push(format!("no transition event for the state in force: {s:?}")),
            Some(t) => {
                let in_state = self.breaker.snapshot().time_in_state;
                if in_state != self.clock.now() - t.at {
                    broken.push(format!(
                        "time in state is {in_state:?}, but the state was entered {:?} ago ({t:?})",
                        self.clock.now() - t.at
                    ));
                }
            }
        }
        if let Some(left) = s.retry_after.filter(|left| *left > COOLDOWN) {
            broken.push(format!(
                "the deadline is {left:?} away, beyond the cooldown"
            ));
        }
        // No dead end: after the longest cooldown plus the probe wait, a call is admitted.
        let before = self.breaker.snapshot();
        self.clock.advance(COOLDOWN + PROBE_WAIT);
        match self.breaker.try_acquire() {
            Ok(p) => {
                let held = self.breaker.snapshot().probes_in_flight;
                if held > self.probes {
                    broken.push(format!("{held} probes in flight, above {}", self.probes));
                }
                p.success();
                // And it stays live: a later trip recovers the same way.
                if self.breaker.state() == State::Closed {
                    self.trip();
                    self.clock.advance(COOLDOWN);
                    if let Err(r) = self.breaker.try_acquire() {
                        broken.push(format!("no recovery after a new trip: {r:?}"));
                    }
                }
            }
            Err(r) => broken.push(format!(
                "dead end: {r:?} after the cooldown and the probe wait (before: {before:?}, \
                 after: {:?})",
                self.breaker.snapshot()
            )),
        }
        assert!(broken.is_empty(), "{}", broken.join("\n"));
    }
}

/// The reported wedge: caller A reserves a second probe slot and, before its probe stamp is
/// written, the first probe fails and re-opens the breaker with a new deadline.
#[test]
fn slot_reservation_parked_while_a_probe_failure_reopens() {
    at_every_clock_read(|read| {
        let r = rig(policy(2, 2));
        let first = r.half_open();
        let got = interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                r.breaker.try_acquire().map(drop).map_err(|e| e.state())
            },
            || first.failure(),
        )?;
        // A was either admitted in the old half-open period (its probe is stale) or rejected
        // by the new open period.
        assert!(matches!(got, Ok(()) | Err(State::Open)), "{got:?}");
        assert_eq!(r.breaker.state(), State::Open);
        assert_eq!(
            r.breaker.snapshot().retry_after,
            Some(COOLDOWN),
            "the new deadline stands"
        );
        r.check();
        Some(())
    });
}

/// Open -> half-open promotion, parked while another caller promotes and its probe fails.
#[test]
fn promotion_parked_while_another_promotion_and_a_probe_failure() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        r.trip();
        r.clock.advance(COOLDOWN);
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                drop(r.breaker.try_acquire());
            },
            || {
                // Promoted here, unless the parked caller promoted first and is parked ending
                // its own probe.
                if let Ok(p) = r.breaker.try_acquire() {
                    assert!(p.is_probe());
                    p.failure();
                }
            },
        )?;
        r.check();
        Some(())
    });
}

/// The expired-probe takeover, parked while the hung probe fails and re-opens.
#[test]
fn expired_probe_takeover_parked_while_the_hung_probe_fails() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        let hung = r.half_open();
        r.clock.advance(PROBE_WAIT);
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                drop(r.breaker.try_acquire());
            },
            || hung.failure(),
        )?;
        r.check();
        Some(())
    });
}

/// The expired-probe takeover, parked while another caller takes over and its probe fails.
#[test]
fn expired_probe_takeover_parked_while_another_takeover() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        let hung = r.half_open();
        r.clock.advance(PROBE_WAIT);
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                drop(r.breaker.try_acquire());
            },
            || {
                // Taken over here, unless the parked caller took over first and is parked
                // ending its own probe.
                if let Ok(p) = r.breaker.try_acquire() {
                    assert!(p.is_probe());
                    p.failure();
                }
            },
        )?;
        drop(hung);
        r.check();
        Some(())
    });
}

/// A probe failure re-opening, parked while the breaker is reset and trips again.
#[test]
fn probe_failure_reopen_parked_while_reset_and_a_new_trip() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        let probe = r.half_open();
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                probe.failure();
            },
            || {
                r.breaker.reset();
                r.trip();
            },
        )?;
        r.check();
        Some(())
    });
}

/// A trip, parked while the breaker is reset and trips again.
#[test]
fn trip_parked_while_reset_and_a_new_trip() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        let p = r.breaker.try_acquire().expect("closed");
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                p.failure();
            },
            || {
                r.breaker.reset();
                r.trip();
            },
        )?;
        r.check();
        Some(())
    });
}

/// A trip parked in the middle: while it is parked, the breaker must not answer "just opened"
/// for longer than one cooldown.
#[test]
fn a_trip_parked_mid_way_holds_the_breaker_for_at_most_one_cooldown() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        let p = r.breaker.try_acquire().expect("closed");
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                p.failure();
            },
            || {
                // Whatever the parked trip has done so far, the breaker has a bounded way out.
                r.clock.advance(COOLDOWN);
                let _first_look = r.breaker.try_acquire();
                r.clock.advance(COOLDOWN + PROBE_WAIT);
                let admitted = r.breaker.try_acquire();
                assert!(
                    admitted.is_ok(),
                    "still rejected while a transition is parked: {admitted:?}"
                );
            },
        )?;
        r.check();
        Some(())
    });
}

/// A manual change (reset), parked while the breaker trips.
#[test]
fn manual_change_parked_while_a_trip() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                r.breaker.reset();
            },
            || {
                r.clock.advance(Duration::from_secs(1));
                r.trip();
            },
        )?;
        r.check();
        Some(())
    });
}

/// Half-open -> closed, parked while the breaker is forced open, reset and trips again.
#[test]
fn close_parked_while_forced_reset_and_a_new_trip() {
    at_every_clock_read(|read| {
        let r = rig(policy(1, 1));
        let probe = r.half_open();
        interleave(
            &r.clock,
            read,
            |arm| {
                arm();
                probe.success();
            },
            || {
                r.breaker.force_open();
                r.breaker.reset();
                r.clock.advance(Duration::from_secs(1));
                r.trip();
            },
        )?;
        r.check();
        Some(())
    });
}
