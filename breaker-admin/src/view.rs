//! The JSON of the status API: one object per breaker row, and pages of a keyed group's keys.
//! Field names, units and ranges are listed in the crate docs ("The JSON").

use crate::catalog::{Item, Kind, Source};
use crate::sampler::{Latency, Rates, Stats};
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, Snapshot, State, Totals};
use breaker_core::policy::Policy;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Breakers by state (a keyed group).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ByState {
    pub(crate) closed: usize,
    pub(crate) open: usize,
    #[serde(rename = "half-open")]
    pub(crate) half_open: usize,
    #[serde(rename = "forced-open")]
    pub(crate) forced_open: usize,
    #[serde(rename = "forced-closed")]
    pub(crate) forced_closed: usize,
}

impl ByState {
    pub(crate) fn add(&mut self, s: State) {
        *match s {
            State::Closed => &mut self.closed,
            State::Open => &mut self.open,
            State::HalfOpen => &mut self.half_open,
            State::ForcedOpen => &mut self.forced_open,
            State::ForcedClosed => &mut self.forced_closed,
        } += 1;
    }

    pub(crate) fn total(&self) -> usize {
        self.closed + self.not_closed()
    }

    pub(crate) fn not_closed(&self) -> usize {
        self.open + self.half_open + self.forced_open + self.forced_closed
    }

    /// The state a band shows for the group: the worst any key is in.
    pub(crate) fn worst(&self) -> State {
        if self.open > 0 {
            State::Open
        } else if self.forced_open > 0 {
            State::ForcedOpen
        } else if self.half_open > 0 {
            State::HalfOpen
        } else if self.forced_closed > 0 {
            State::ForcedClosed
        } else {
            State::Closed
        }
    }
}

/// The current window of a closed breaker.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct WindowJson {
    /// Calls, failures and slow calls recorded in the window.
    pub(crate) calls: u32,
    pub(crate) failures: u32,
    pub(crate) slow: u32,
    /// Failures as a percentage of calls, 0..=100 (0 for an empty window).
    pub(crate) failure_rate_percent: f64,
    pub(crate) slow_rate_percent: f64,
    /// The trip rule's shape, in the DSL's words: the window of a rate rule (`100 calls`,
    /// `1m`); for a policy whose only rule is consecutive failures, which keeps no window
    /// (`calls` and `failures` above stay 0), that rule (`5 consecutive`).
    pub(crate) shape: String,
}

/// Lifetime totals, as [`Totals`].
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TotalsJson {
    pub(crate) admitted: u64,
    pub(crate) rejected: u64,
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
    pub(crate) ignored: u64,
    pub(crate) cancelled: u64,
    pub(crate) late: u64,
    pub(crate) opened: u64,
}

impl From<Totals> for TotalsJson {
    fn from(t: Totals) -> Self {
        TotalsJson {
            admitted: t.admitted,
            rejected: t.rejected,
            succeeded: t.succeeded,
            failed: t.failed,
            ignored: t.ignored,
            cancelled: t.cancelled,
            late: t.late,
            opened: t.opened,
        }
    }
}

/// A breaker's state, as its [`Snapshot`] says.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct StateJson {
    pub(crate) state: &'static str,
    pub(crate) generation: u32,
    pub(crate) time_in_state_ms: u64,
    /// Open: milliseconds until a probe may be admitted.
    pub(crate) retry_after_ms: Option<u64>,
    pub(crate) consecutive_failures: u32,
    pub(crate) window: WindowJson,
    pub(crate) probes_in_flight: u32,
    pub(crate) probe_successes: u32,
    /// `null` unless the breaker keeps lifetime totals.
    pub(crate) totals: Option<TotalsJson>,
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The trip rule's shape (see [`WindowJson::shape`]).
fn shape(p: &BreakerPolicy) -> String {
    match p.consecutive_failures {
        Some(n) if p.failure_rate_percent.is_none() && p.slow_call.is_none() => {
            format!("{n} consecutive")
        }
        _ => p.window.to_string(),
    }
}

impl StateJson {
    pub(crate) fn of(breaker: &CircuitBreaker, snap: &Snapshot) -> StateJson {
        StateJson {
            state: snap.state.as_str(),
            generation: snap.generation,
            time_in_state_ms: ms(snap.time_in_state),
            retry_after_ms: snap.retry_after.map(ms),
            consecutive_failures: snap.consecutive_failures,
            window: WindowJson {
                calls: snap.window.calls,
                failures: snap.window.failures,
                slow: snap.window.slow,
                failure_rate_percent: snap.window.failure_rate(),
                slow_rate_percent: snap.window.slow_rate(),
                shape: shape(&breaker.policy()),
            },
            probes_in_flight: snap.probes_in_flight,
            probe_successes: snap.probe_successes,
            totals: snap.totals.map(Into::into),
        }
    }
}

/// The policy in force, as DSL text per layer: every layer the policy or the pipeline has,
/// each in the text its own parser reads back (`"5/s burst 2".parse::<RateLimitPolicy>()`);
/// `null` for a layer it does not have.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct PolicyJson {
    /// The breaker (`5 consecutive, open 30s, probes 1, close after 1`).
    pub(crate) breaker: Option<String>,
    pub(crate) retry: Option<String>,
    pub(crate) timeout: Option<String>,
    pub(crate) deadline: Option<String>,
    pub(crate) bulkhead: Option<String>,
    /// The rate limit (`5/s burst 2`).
    pub(crate) rate: Option<String>,
    /// Hedging (`1x after 20ms`).
    pub(crate) hedge: Option<String>,
    /// The adaptive concurrency limit (`aimd 1..4`).
    pub(crate) adaptive: Option<String>,
    /// Client-side adaptive throttling (`k 2`).
    pub(crate) throttle: Option<String>,
    /// The layers' nesting, outermost first (`bulkhead > retry > breaker > timeout`).
    pub(crate) order: Option<String>,
}

fn duration_text(d: std::time::Duration) -> String {
    breaker_core::dsl::format_duration(d)
}

impl PolicyJson {
    fn of(item: &Item) -> PolicyJson {
        let mut out = PolicyJson {
            breaker: item.breaker_dsl(),
            ..PolicyJson::default()
        };
        if let Some(p) = &item.policy {
            fill(&mut out, p);
        }
        if out.order.is_none() && !item.layers.is_empty() {
            out.order = Some(order_text(&item.layers));
        }
        out
    }
}

fn order_text(layers: &[breaker_core::layer::Layer]) -> String {
    layers
        .iter()
        .map(|l| l.name())
        .collect::<Vec<_>>()
        .join(" > ")
}

fn fill(out: &mut PolicyJson, p: &Policy) {
    out.retry = p.retry.as_ref().map(ToString::to_string);
    out.timeout = p.timeout.map(duration_text);
    out.deadline = p.deadline.map(duration_text);
    out.bulkhead = p.bulkhead.as_ref().map(ToString::to_string);
    out.rate = p.rate_limit.as_ref().map(ToString::to_string);
    out.hedge = p.hedge.as_ref().map(ToString::to_string);
    out.adaptive = p.adaptive.as_ref().map(ToString::to_string);
    out.throttle = p.throttle.as_ref().map(ToString::to_string);
    let order = p.effective_order();
    if !order.is_empty() {
        out.order = Some(order_text(&order));
    }
}

/// A keyed group's summary.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct KeysJson {
    /// Breakers held now.
    pub(crate) count: usize,
    /// The registry's bound (`null`: unbounded).
    pub(crate) max_keys: Option<usize>,
    /// Keys open now (`by_state.open`), beside `count`: "2 of 4 keys open".
    pub(crate) open: usize,
    pub(crate) by_state: ByState,
}

/// One row of the status API.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BreakerJson {
    /// The row's id: its name in URLs (`/api/v1/breakers/{id}`).
    pub(crate) id: String,
    /// The breaker's own name (a keyed group: the id).
    pub(crate) name: String,
    pub(crate) kind: Kind,
    /// A breaker's state; a keyed group's: the worst state of its keys.
    #[serde(flatten)]
    pub(crate) state: Option<StateJson>,
    /// A keyed group's state, when `state` is absent: the worst state any of its keys is in
    /// (open, then forced open, half-open, forced closed, closed), so one open key of four
    /// makes it `open`; `keys.by_state` has how many keys are in each state, and `keys.open`
    /// of `keys.count` says how far the outage reaches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) group_state: Option<&'static str>,
    pub(crate) policy: PolicyJson,
    pub(crate) source: Source,
    /// The pipeline's layers, outermost first.
    pub(crate) layers: Vec<&'static str>,
    pub(crate) used_by: Vec<String>,
    pub(crate) rates: Option<Rates>,
    pub(crate) latency: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) history: Option<crate::sampler::History>,
    pub(crate) keys: Option<KeysJson>,
    /// The fleet's view of a shared breaker, beside the local one above; `null` for a breaker
    /// that is not shared.
    pub(crate) fleet: Option<serde_json::Value>,
}

impl BreakerJson {
    pub(crate) fn of(item: &Item, stats: Stats, fleet: Option<serde_json::Value>) -> BreakerJson {
        let (state, name, keys, group_state) = match (&item.breaker, &item.keys) {
            (Some(b), _) => (
                Some(StateJson::of(b, &b.snapshot())),
                b.name().to_owned(),
                None,
                None,
            ),
            (None, Some(k)) => {
                let mut by_state = ByState::default();
                k.for_each(&mut |_, b| by_state.add(b.state()));
                let max = k.max_keys();
                (
                    None,
                    item.id.clone(),
                    Some(KeysJson {
                        count: by_state.total(),
                        max_keys: (max != usize::MAX).then_some(max),
                        open: by_state.open,
                        by_state: by_state.clone(),
                    }),
                    Some(by_state.worst().as_str()),
                )
            }
            (None, None) => (None, item.id.clone(), None, None),
        };
        BreakerJson {
            id: item.id.clone(),
            name,
            kind: item.kind,
            state,
            group_state,
            policy: PolicyJson::of(item),
            source: item.source.clone(),
            layers: item.layers.iter().map(|l| l.name()).collect(),
            used_by: item.used_by.clone(),
            rates: stats.rates,
            latency: stats.latency,
            history: stats.history,
            keys,
            fleet,
        }
    }
}

/// One key of a keyed group.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct KeyJson {
    pub(crate) key: String,
    #[serde(flatten)]
    pub(crate) state: StateJson,
    /// The fleet's view of a key shared by a fleet (`GET /api/v1/breakers/{id}/keys/{key}`
    /// only); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fleet: Option<serde_json::Value>,
}

/// A page of a keyed group's keys, busiest first.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct KeysPage {
    pub(crate) breaker: String,
    /// Keys that match the filter (all keys without `state=`).
    pub(crate) matched: usize,
    pub(crate) offset: usize,
    pub(crate) limit: usize,
    /// How the keys are ordered.
    pub(crate) order: &'static str,
    pub(crate) keys: Vec<KeyJson>,
}

/// The rank of a key: not closed first, then the most calls, then by key.
struct Ranked {
    not_closed: bool,
    activity: u64,
    key: String,
    breaker: CircuitBreaker,
    snap: Snapshot,
}

impl Ranked {
    fn cmp_rank(&self, other: &Self) -> Ordering {
        // Greater = earlier in the page.
        self.not_closed
            .cmp(&other.not_closed)
            .then(self.activity.cmp(&other.activity))
            .then_with(|| other.key.cmp(&self.key))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_rank(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        // A min-heap on rank: the heap's top is the least busy kept so far.
        other.cmp_rank(self)
    }
}

/// The order of [`KeysPage::keys`].
pub(crate) const BUSIEST_FIRST: &str = "busiest first: keys not closed first, then the most calls \
    (lifetime totals where kept, else the current window's calls plus consecutive failures), then \
    by key";

/// The page `offset..offset + limit` of `keys`, busiest first, keeping only keys in `state`
/// when given. Memory: `offset + limit` keys, whatever the number of keys.
pub(crate) fn keys_page(
    id: &str,
    keys: &dyn crate::catalog::Keys,
    offset: usize,
    limit: usize,
    state: Option<State>,
) -> KeysPage {
    let keep = offset + limit;
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(keep.min(4096) + 1);
    let mut matched = 0;
    keys.for_each(&mut |key, b| {
        let snap = b.snapshot();
        if state.is_some_and(|s| s != snap.state) {
            return;
        }
        matched += 1;
        let activity = match snap.totals {
            Some(t) => t.admitted + t.rejected,
            None => u64::from(snap.window.calls) + u64::from(snap.consecutive_failures),
        };
        let r = Ranked {
            not_closed: snap.state != State::Closed,
            activity,
            key,
            breaker: b.clone(),
            snap,
        };
        if heap.len() < keep {
            heap.push(r);
        } else if let Some(mut least) = heap.peek_mut() {
            if r.cmp_rank(&least) == Ordering::Greater {
                *least = r;
            }
        }
    });
    // Busiest first.
    let mut all = heap.into_sorted_vec();
    // `into_sorted_vec` is ascending by `Ord`, which is the reverse rank: busiest first.
    let page = all
        .drain(..)
        .skip(offset)
        .take(limit)
        .map(|r| KeyJson {
            state: StateJson::of(&r.breaker, &r.snap),
            key: r.key,
            fleet: None,
        })
        .collect();
    KeysPage {
        breaker: id.to_owned(),
        matched,
        offset,
        limit,
        order: BUSIEST_FIRST,
        keys: page,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breaker_core::breaker::BreakerPolicy;
    use breaker_core::registry::Registry;

    #[test]
    fn keys_come_busiest_first_and_pages_do_not_overlap() {
        let factory = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: Some(3),
            ..BreakerPolicy::default()
        })
        .name("hosts")
        .build_factory()
        .unwrap();
        let hosts: Registry<String> = Registry::new(factory);
        for (i, host) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let b = hosts.get_or_create(*host).unwrap();
            // 0 to 3 failures in a row: `d` and `e` trip (3 consecutive).
            for _ in 0..i.min(3) {
                b.try_acquire().unwrap().failure();
            }
        }
        assert_eq!(hosts.get("e").unwrap().state(), State::Open);
        let page = keys_page("hosts", &hosts, 0, 3, None);
        assert_eq!(page.matched, 5);
        let keys: Vec<_> = page.keys.iter().map(|k| k.key.as_str()).collect();
        // Open first (d and e: no window calls, 0 consecutive failures once open: by key),
        // then the closed key with the most consecutive failures.
        assert_eq!(keys, ["d", "e", "c"]);
        let next = keys_page("hosts", &hosts, 3, 3, None);
        let keys: Vec<_> = next.keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        let open = keys_page("hosts", &hosts, 0, 10, Some(State::Open));
        assert_eq!(open.matched, 2);
        assert_eq!(open.keys[0].state.state, "open");
    }
}
