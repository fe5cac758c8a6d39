//! The breaker's decisions, public to a fleet backend: pure functions over the state word.
//!
//! Hidden and unstable: an entry point for the shared-state backend (`breaker-redis`), not for
//! applications. It is what makes a fleet-wide breaker *the same* state machine as a local
//! one: the local machine (`machine/`) applies these functions to the word in an atomic with
//! one compare-and-swap loop, and the fleet applies the very same functions to the word it
//! reads from its store, with the store's fenced compare-and-set. No rule of the breaker is
//! written anywhere else (the store's script keeps none; see `breaker-redis`'s protocol docs).
//!
//! What is here, and nothing that knows about atomics, clocks or where the word lives:
//! - [`Word`] (state, probe counts, open streak, 24-bit generation) with its `u64`
//!   [`encode`](Word::encode) / [`decode`](Word::decode), the layout the fleet stores too;
//!   [`newer`] compares generations (serial arithmetic);
//! - admission: [`admit`], [`admit_open`] (the lazy open -> half-open promotion),
//!   [`admit_half_open`] and [`free_slot`] (probe slots, and the takeover that keeps the
//!   half-open period), with the half-open [`Limits`];
//! - ends and trips: [`end_probe`] ([`ProbeEnd`]), [`trip`], [`reopen`], and the rate rules
//!   on a window's totals, [`rate_trip`];
//! - manual and remote changes: [`force`];
//! - how long an opening lasts: [`cooldown`] (growth and jitter, one formula).
//!
//! Times given to the admission decisions are readings of one clock in one unit on the 48-bit
//! circle: microseconds in this process, the store's milliseconds in a fleet (a server's
//! milliseconds since 1970 are far inside the circle).

pub use super::rules::{
    admit, admit_half_open, admit_open, cooldown, end_probe, force, free_slot, open_left,
    rate_trip, reopen, trip, Admit, Forced, Limits, ProbeEnd, RateThresholds, Step,
};
pub use super::state::{newer, Word, GEN_MASK, MAX_IN_FLIGHT};
