//! The sampler: reads every breaker at a fixed interval, keeps a short history per row (state,
//! calls, failures, rejections, latency), and publishes what only a reading shows: rejection
//! counts and keyed groups' counts by state. Transitions are not read here: each one comes from
//! the breaker itself ([`transitions`](crate::transitions)), so none is merged or invented.
//!
//! # Why sampling
//! A breaker's hot path has no hook for an observer, and must not get one: the closed path is
//! a few nanoseconds and its benchmark is the project's contract. Everything here reads what
//! the breaker already keeps: its state word ([`Snapshot`]), its lifetime [`Totals`] (striped
//! counters, when kept) and, for latency, a recorder's histogram. So a mounted status API costs
//! calls nothing; rejections are counted per interval
//! ([`AdminBuilder::sample_every`](crate::AdminBuilder::sample_every), 250 ms by default).
//!
//! One tick costs a snapshot per breaker row and, per keyed group, one pass over its keys
//! (a snapshot each, under each shard's read lock in turn): about 50 ns per key.

use crate::catalog::Item;
use crate::events::{Bus, Event};
use crate::latency::{self, Histogram, BUCKETS};
use crate::view::ByState;
use breaker_core::breaker::{Snapshot, State, Totals};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The letter of a state in a history band.
pub(crate) fn letter(s: State) -> u8 {
    match s {
        State::Closed => b'c',
        State::Open => b'o',
        State::HalfOpen => b'h',
        State::ForcedOpen => b'f',
        State::ForcedClosed => b'd',
    }
}

/// The last reading of a row.
#[derive(Clone, Copy)]
struct Last {
    totals: Option<Totals>,
}

/// One row's history.
#[derive(Default)]
struct Track {
    last: Option<Last>,
    /// Per tick, oldest first: the state letter, and the calls ended, failed and rejected in
    /// the tick (0 without totals).
    states: VecDeque<u8>,
    calls: VecDeque<u32>,
    failures: VecDeque<u32>,
    rejections: VecDeque<u32>,
    /// Latency readings, about one a second, oldest first: (tick, counts).
    latency: VecDeque<(u64, Box<[u64; BUCKETS]>)>,
    by_state: Option<ByState>,
    has_totals: bool,
}

/// What the status API shows of a row's history.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct Stats {
    /// Per second over the last second (the last ticks covering it); `None` without totals.
    pub(crate) rates: Option<Rates>,
    /// Latency percentiles of the attempts that reached the dependency over the last
    /// `window_s` seconds; `None` without a recorder or without such attempts.
    pub(crate) latency: Option<Latency>,
    pub(crate) history: Option<History>,
}

/// Per-second rates.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Rates {
    pub(crate) calls_per_s: f64,
    pub(crate) failures_per_s: f64,
    pub(crate) rejections_per_s: f64,
}

/// Latency percentiles, microseconds (bucket upper edges: at most 25 % high).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Latency {
    pub(crate) p50_us: u64,
    pub(crate) p90_us: u64,
    pub(crate) p99_us: u64,
    pub(crate) max_us: u64,
    pub(crate) attempts: u64,
    pub(crate) window_s: f64,
}

/// The band and the per-tick series, oldest first.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct History {
    pub(crate) every_ms: u64,
    /// How many readings the history holds when full (the band's width).
    pub(crate) slots: usize,
    /// One letter per tick: `c` closed, `o` open, `h` half-open, `f` forced open, `d` forced
    /// closed (disabled).
    pub(crate) states: String,
    pub(crate) calls: Vec<u32>,
    pub(crate) failures: Vec<u32>,
    pub(crate) rejections: Vec<u32>,
}

/// The sampler's state; ticks are driven by [`run`](crate::admin) on the tokio clock.
pub(crate) struct Sampler {
    pub(crate) every: Duration,
    /// Ticks kept per row.
    pub(crate) keep: usize,
    /// The latency window, in ticks.
    latency_ticks: u64,
    tracks: Mutex<HashMap<String, Track>>,
    /// Latency histograms, by row id or breaker name ([`Admin::recorder`](crate::Admin::recorder)).
    pub(crate) histograms: Mutex<HashMap<String, Arc<Histogram>>>,
    tick: Mutex<u64>,
}

/// How often a latency reading is kept, and over how long percentiles are read.
const LATENCY_WINDOW: Duration = Duration::from_secs(10);

impl Sampler {
    pub(crate) fn new(every: Duration, history: Duration) -> Sampler {
        let every = every.max(Duration::from_millis(1));
        let keep = (history.as_nanos() / every.as_nanos()).clamp(1, 100_000) as usize;
        Sampler {
            every,
            keep,
            latency_ticks: (LATENCY_WINDOW.as_nanos() / every.as_nanos()).max(1) as u64,
            tracks: Mutex::new(HashMap::new()),
            histograms: Mutex::new(HashMap::new()),
            tick: Mutex::new(0),
        }
    }

    fn histogram(&self, item: &Item) -> Option<Arc<Histogram>> {
        let h = lock(&self.histograms);
        h.get(&item.id)
            .or_else(|| item.breaker.as_ref().and_then(|b| h.get(b.name())))
            .cloned()
    }

    /// Reads every row once, publishes what changed, and returns how many events it
    /// published. `at_ms`: the admin clock's reading.
    pub(crate) fn tick(&self, items: &[Item], bus: &Bus, at_ms: u64) -> usize {
        let tick = {
            let mut t = lock(&self.tick);
            *t += 1;
            *t
        };
        let mut events = Vec::new();
        let mut tracks = lock(&self.tracks);
        tracks.retain(|id, _| items.iter().any(|i| &i.id == id));
        for item in items {
            let track = tracks.entry(item.id.clone()).or_default();
            if let Some(breaker) = &item.breaker {
                let snap = breaker.snapshot();
                self.read_breaker(item, &snap, track, at_ms, &mut events);
            } else if let Some(keys) = &item.keys {
                let mut by_state = ByState::default();
                keys.for_each(&mut |_, b| by_state.add(b.state()));
                let band = by_state.worst();
                push(&mut track.states, letter(band), self.keep);
                for series in [&mut track.calls, &mut track.failures, &mut track.rejections] {
                    push(series, 0, self.keep);
                }
                if track.by_state.as_ref() != Some(&by_state) {
                    if track.by_state.is_some() || by_state.not_closed() > 0 {
                        events.push(Event::Keys {
                            breaker: item.id.clone(),
                            keys: by_state.total(),
                            by_state: by_state.clone(),
                            at_ms,
                        });
                    }
                    track.by_state = Some(by_state);
                }
            }
            if let Some(h) = self.histogram(item) {
                let due = track.latency.back().map_or(true, |(t, _)| {
                    (tick - t) * self.every.as_millis() as u64 >= 1000
                });
                if due {
                    track.latency.push_back((tick, h.counts()));
                    while track
                        .latency
                        .front()
                        .is_some_and(|(t, _)| tick - t > self.latency_ticks)
                    {
                        track.latency.pop_front();
                    }
                }
            }
        }
        drop(tracks);
        let n = events.len();
        for e in events {
            bus.publish(e);
        }
        n
    }

    fn read_breaker(
        &self,
        item: &Item,
        snap: &Snapshot,
        track: &mut Track,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) {
        let now = Last {
            totals: snap.totals,
        };
        track.has_totals = now.totals.is_some();
        let (mut calls, mut failures, mut rejections) = (0u64, 0u64, 0u64);
        if let Some(last) = track.last {
            if let (Some(a), Some(b)) = (last.totals, now.totals) {
                calls = b.admitted.saturating_sub(a.admitted);
                failures = b.failed.saturating_sub(a.failed);
                rejections = b.rejected.saturating_sub(a.rejected);
                if rejections > 0 {
                    events.push(Event::Rejections {
                        breaker: item.id.clone(),
                        count: rejections,
                        state: snap.state.as_str(),
                        at_ms,
                    });
                }
            }
        }
        track.last = Some(now);
        push(&mut track.states, letter(snap.state), self.keep);
        let c = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        push(&mut track.calls, c(calls), self.keep);
        push(&mut track.failures, c(failures), self.keep);
        push(&mut track.rejections, c(rejections), self.keep);
    }

    /// The history of row `item`, as the status API shows it.
    pub(crate) fn stats(&self, item: &Item, with_history: bool) -> Stats {
        let tracks = lock(&self.tracks);
        let Some(track) = tracks.get(&item.id) else {
            return Stats::default();
        };
        let every_s = self.every.as_secs_f64();
        let rates = (track.has_totals && item.breaker.is_some()).then(|| {
            // The ticks covering the last second (at least one).
            let n = ((1.0 / every_s).round() as usize).clamp(1, track.calls.len().max(1));
            let sum =
                |q: &VecDeque<u32>| q.iter().rev().take(n).map(|&v| f64::from(v)).sum::<f64>();
            let span = n.min(track.calls.len()).max(1) as f64 * every_s;
            Rates {
                calls_per_s: sum(&track.calls) / span,
                failures_per_s: sum(&track.failures) / span,
                rejections_per_s: sum(&track.rejections) / span,
            }
        });
        let latency = self.histogram(item).and_then(|h| {
            let now = h.counts();
            let (first_tick, first) = track
                .latency
                .front()
                .map(|(t, c)| (Some(*t), Some(&**c)))
                .unwrap_or((None, None));
            let tick = *lock(&self.tick);
            let (attempts, p) = latency::percentiles(&now, first, &[0.5, 0.9, 0.99, 1.0])?;
            Some(Latency {
                p50_us: p[0],
                p90_us: p[1],
                p99_us: p[2],
                max_us: p[3],
                attempts,
                window_s: first_tick.map_or(0.0, |t| (tick - t) as f64 * every_s),
            })
        });
        let history = with_history.then(|| History {
            every_ms: self.every.as_millis() as u64,
            slots: self.keep,
            states: String::from_utf8_lossy(&track.states.iter().copied().collect::<Vec<_>>())
                .into_owned(),
            calls: track.calls.iter().copied().collect(),
            failures: track.failures.iter().copied().collect(),
            rejections: track.rejections.iter().copied().collect(),
        });
        Stats {
            rates,
            latency,
            history,
        }
    }
}

fn push<T>(q: &mut VecDeque<T>, v: T, keep: usize) {
    if q.len() == keep {
        q.pop_front();
    }
    q.push_back(v);
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Kind, Source};
    use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
    use breaker_core::clock::{Clock, ManualClock};

    fn item(breaker: &CircuitBreaker) -> Item {
        Item {
            id: breaker.name().to_owned(),
            kind: Kind::Plain,
            breaker: Some(breaker.clone()),
            keys: None,
            policy: None,
            source: Source::Code,
            layers: Vec::new(),
            used_by: Vec::new(),
            fleet: None,
        }
    }

    #[test]
    fn rejections_and_rates_come_from_two_readings_and_transitions_never_do() {
        let time = ManualClock::new();
        let b = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: Some(2),
            cooldown: Duration::from_secs(10),
            cooldown_max: Duration::from_secs(10),
            ..BreakerPolicy::default()
        })
        .name("inventory")
        .clock(Clock::manual(&time))
        .totals(true)
        .build()
        .unwrap();
        let sampler = Sampler::new(Duration::from_millis(250), Duration::from_secs(60));
        let bus = Bus::new(64, 4);
        let mut rx = bus.receiver();
        let items = [item(&b)];
        assert_eq!(
            sampler.tick(&items, &bus, 0),
            0,
            "the first reading is the baseline"
        );
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure();
        for _ in 0..3 {
            b.try_acquire().unwrap_err();
        }
        // The trip is the breaker's own event (`transitions`), not the sampler's.
        assert_eq!(sampler.tick(&items, &bus, 250), 1);
        let r = rx.try_recv().unwrap();
        assert_eq!(
            r.event,
            Event::Rejections {
                breaker: "inventory".into(),
                count: 3,
                state: "open",
                at_ms: 250,
            }
        );
        let stats = sampler.stats(&items[0], true);
        // The last second is 4 ticks of 250 ms, of which 2 were read: 3 calls, 2 failures and
        // 3 rejections in 0.5 s.
        assert_eq!(
            stats.rates,
            Some(Rates {
                calls_per_s: 6.0,
                failures_per_s: 4.0,
                rejections_per_s: 6.0,
            })
        );
        assert_eq!(stats.history.unwrap().states, "co");
        time.advance(Duration::from_secs(10));
        b.try_acquire().unwrap().success();
        assert_eq!(sampler.tick(&items, &bus, 500), 0);
        assert!(rx.try_recv().is_err());
        assert_eq!(
            sampler.stats(&items[0], true).history.unwrap().states,
            "coc"
        );
    }
}
