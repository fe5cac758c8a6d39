//! The atomic machine: where the state word lives in this process, and the one path every
//! transition takes.
//!
//! - **Decide, then swap.** Every change of the word is a pure decision from `rules.rs` applied
//!   by [`Inner::update`], one compare-and-swap loop (governor's `measure_and_replace_one`): read
//!   the word, decide, swap; if another thread changed the word first, decide again on the word
//!   that won. A decision that needs the time (admission, a trip, a manual change) reads the
//!   clock before the loop (admission again on each retry, so that it never decides on a word
//!   newer than its reading); the end of a probe reads it only when it makes a transition, after
//!   its swap. Either way what is stamped after the swap is fenced (below), so it does not
//!   matter when a delayed writer gets to write.
//! - **One `entered`.** The thread whose swap made a transition calls [`Inner::entered`], which
//!   does what every transition does, in one place: the entry stamp, the deadline or first
//!   probe stamp, the totals, the `tracing` event and the listeners.
//! - **Fenced stamps.** A stamp is written by [`Inner::stamp`] with a compare-and-swap that
//!   never replaces a stamp of the generation in force and never writes once the word has moved
//!   past the writer's generation, so a writer delayed after its swap cannot clobber a newer
//!   generation's deadline (the stuck-open fault of issue 11).
//! - **No "not stamped yet" forever.** A reader that finds the generation in force without its
//!   stamp (the winner of the swap has not written it yet) writes it itself, once, from its own
//!   reading: an open breaker then admits a probe at most one cooldown later, whatever happened
//!   to the winner.
//!
//! Files, one concern each (every `impl Inner` of the crate is here):
//! - `mod.rs`: [`Inner`] and what it keeps, the update loop and the fenced stamps;
//! - `admit.rs`: admission (`acquire`): the closed path inline, the open path by the hint,
//!   everything else through the update loop;
//! - `hint.rs`: the open state's hint, which lets a rejection read the coarse clock;
//! - `finish.rs`: the ends of calls and probes, trips, manual and remote changes;
//! - `closed.rs`: the closed state's counts (consecutive failures, the sliding window) and
//!   the trips they decide;
//! - `entered.rs`: what every transition does (`entered`: stamps, totals, events);
//! - `fleet.rs`: a fleet backend's hook on the call paths;
//! - `snapshot.rs`: the read-only view.

mod admit;
mod closed;
mod entered;
mod finish;
mod fleet;
mod hint;
mod snapshot;

use super::policy::BreakerPolicy;
use super::remote::FleetSlot;
use super::rules::{Decision, Limits};
use super::shared::Shared;
use super::state::{pack_stamp, span, unpack_stamp, Word};
use super::store::WindowSlot;
use super::totals::{Counter, Striped};
use super::CircuitBreaker;
use crate::sync::{AtomicU64, Ordering};
use once_cell::race::OnceBox;
use std::sync::Arc;
use std::time::Duration;

/// What a breaker keeps only when it needs it (so a consecutive-rule breaker without totals
/// keeps one heap block): made with the breaker for a window, totals or a key, or when a fleet
/// hook is installed (`remote.rs`), never removed.
pub(crate) struct Heavy {
    /// The sliding window (boxed, so a breaker without one keeps `Heavy` at 32 bytes).
    pub(crate) window: Option<Box<WindowSlot>>,
    pub(crate) totals: Option<Striped>,
    /// The key of a keyed breaker (`BreakerFactory::create_keyed`), for its events.
    pub(crate) key: Option<Arc<str>>,
    /// A fleet-wide backend's hook, set once (`remote.rs`); empty for a local breaker.
    pub(crate) fleet: std::sync::OnceLock<Box<FleetSlot>>,
}

/// One breaker's state: the word, its stamps and counters.
pub(crate) struct Inner {
    /// The state word; see `state.rs`.
    pub(crate) state: AtomicU64,
    /// Open: when the cooldown ends. Half-open: when the newest probe was admitted. Closed and
    /// forced: when the state was entered. A stamp (`pack_stamp`), written by [`Inner::stamp`].
    pub(crate) at: AtomicU64,
    /// When the current state was entered (a stamp).
    pub(crate) since: AtomicU64,
    /// Consecutive failures while closed (`pack_count`): only ever written by the closed
    /// path, so it holds no failure of a period when it has none to count.
    pub(crate) consecutive: AtomicU64,
    /// Open: a reading of the coarse clock before which the cooldown surely has time left, a
    /// stamp of the open generation in units of `2^10` ns (see `hint.rs`); 0 when none was
    /// left.
    pub(crate) hint: AtomicU64,
    pub(crate) shared: Arc<Shared>,
    /// Set at creation or by a fleet hook's installation, once: one pointer, read with one
    /// load (`OnceBox`), so a breaker without it decides as fast as one that can never have it.
    pub(crate) heavy: OnceBox<Heavy>,
}

/// How [`Inner::stamp`] treats a stamp already written for the same generation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// Keep it: the first writer of a generation wins (entry time, deadline).
    Once,
    /// Keep the later time (the newest probe's admission, the open hint).
    Latest,
}

impl Inner {
    /// This breaker's identity: its address, shared by its clones.
    pub(crate) fn id(&self) -> usize {
        self as *const Inner as usize
    }

    /// What this breaker keeps beyond the word and its stamps, if anything.
    #[inline(always)]
    pub(crate) fn heavy(&self) -> Option<&Heavy> {
        self.heavy.get()
    }

    pub(crate) fn key(&self) -> &str {
        self.heavy().and_then(|h| h.key.as_deref()).unwrap_or("")
    }

    #[inline(always)]
    pub(crate) fn count(&self, c: Counter) {
        if let Some(h) = self.heavy() {
            if let Some(t) = &h.totals {
                t.add(c);
            }
        }
    }

    // --- The update loop and the stamps -------------------------------------------------------

    /// The one compare-and-swap loop. `decide` sees the word (first `raw`) and returns a
    /// decision, or `None` to have the word read again (a stamp it needed belonged to a newer
    /// generation); a decision with a next word is swapped in, and if another thread changed
    /// the word first, `decide` runs again on the word that won. Returns the word the decision
    /// was taken on and the decision.
    #[inline]
    pub(crate) fn update<D: Decision>(
        &self,
        mut raw: u64,
        mut decide: impl FnMut(Word) -> Option<D>,
    ) -> (Word, D) {
        loop {
            let w = Word::decode(raw);
            let Some(d) = decide(w) else {
                raw = self.state.load(Ordering::Acquire);
                continue;
            };
            let Some(next) = d.next() else {
                return (w, d);
            };
            match self.state.compare_exchange(
                raw,
                next.encode(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return (w, d),
                Err(actual) => raw = actual,
            }
        }
    }

    /// Writes `value` as `generation`'s stamp in `cell`, fenced by the generation: a stamp of
    /// `generation` already there is kept (`Once`) or kept if later (`Latest`), and nothing is
    /// written once the word has moved past `generation`, so a delayed writer never replaces a
    /// newer generation's stamp. Returns the time `cell` holds for `generation` afterwards, or
    /// `None` if `generation` is no longer the one in force and its stamp was not written.
    ///
    /// Why this is enough: a newer generation's writer swaps the word *before* it stamps. If
    /// this writer's compare-and-swap of `cell` succeeds, it read the cell before the newer
    /// stamp landed (else the swap would fail on the changed value), and the newer writer, which
    /// stamps with the same loop, then replaces it. If it fails, it re-reads the cell; having
    /// seen the newer stamp (acquire), it sees the newer word and stops. (The word is not read
    /// when the cell already holds this generation's stamp: the swap from it succeeds only if no
    /// newer stamp has landed.)
    pub(crate) fn stamp(
        &self,
        cell: &AtomicU64,
        generation: u32,
        value: u64,
        write: Write,
    ) -> Option<u64> {
        let mut cur = cell.load(Ordering::Acquire);
        loop {
            match unpack_stamp(cur, generation) {
                Some(have) if write == Write::Once || span(value, have) >= 0 => return Some(have),
                // The cell holds this generation's stamp: a swap from it cannot replace a newer
                // generation's (that one would have changed the cell first).
                Some(_) => {}
                None => {
                    if Word::raw_generation(self.state.load(Ordering::Acquire)) != generation {
                        return None;
                    }
                }
            }
            match cell.compare_exchange(
                cur,
                pack_stamp(value, generation),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(value),
                Err(actual) => cur = actual,
            }
        }
    }
}

/// Limits for the decisions that read none (closed and forced states).
const NO_LIMITS: Limits = Limits {
    half_open_probes: 0,
    successes_to_close: 0,
    probe_wait: 0,
};

fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A new breaker of configuration `shared`, with lifetime totals on or off. `policy` is the
/// policy in force, read after window epoch `epoch` (so it has that epoch's shape or a newer
/// one; see `BreakerFactory::create_with`).
#[inline(always)]
pub(crate) fn create(
    shared: Arc<Shared>,
    key: Option<Arc<str>>,
    totals: bool,
    epoch: u32,
    policy: &BreakerPolicy,
) -> CircuitBreaker {
    // Plain branches, not `bool::then` closures: a closure that owns the parts would bring
    // its own drop glue to every breaker's creation.
    let heavy = if totals || key.is_some() || policy.uses_window() {
        let window = if policy.uses_window() {
            Some(Box::new(WindowSlot::new(policy.window, epoch)))
        } else {
            None
        };
        OnceBox::with_value(Box::new(Heavy {
            window,
            totals: if totals { Some(Striped::new()) } else { None },
            key,
            fleet: std::sync::OnceLock::new(),
        }))
    } else {
        OnceBox::new()
    };
    CircuitBreaker {
        inner: triomphe::Arc::new(Inner {
            state: AtomicU64::new(Word::INITIAL),
            at: AtomicU64::new(0),
            since: AtomicU64::new(0),
            consecutive: AtomicU64::new(0),
            hint: AtomicU64::new(0),
            shared,
            heavy,
        }),
    }
}
