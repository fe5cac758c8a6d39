//! Every transition of the breakers an admin shows, one event each, from the breakers' own
//! transition events.
//!
//! # Why not from readings
//! A reading of a breaker (its state and generation) every interval cannot tell `open ->
//! half-open -> closed` from `open -> closed`, or say why each step was taken. The breaker
//! itself knows: each transition it makes is a [`Transition`] with from, to and reason, and
//! [`watch_transitions`] hands every one of the process's to a watcher, whoever built the
//! breaker (a config registry, an annotated function, a keyed registry, the program).
//!
//! # Cost
//! Only transitions pay, never calls: the watcher runs on the thread that made the transition,
//! checks the breaker's name against the names the admin shows (a read lock and a hash), and
//! pushes a small record into a bounded queue (a short lock). A full queue drops the
//! transition and counts it; the readers are told how many with a `dropped` event. The
//! sampler's task drains the queue at each tick, finds each breaker's row (by identity, so two
//! breakers of one name are never confused) and publishes one `transition` event per record.

use crate::catalog::Item;
use crate::events::{Bus, Event};
use crate::sampler::lock;
use breaker_core::breaker::{
    watch_transitions, BreakerId, State, Transition, TransitionReason, Watch,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// One transition, as the watcher saw it.
struct Raw {
    id: BreakerId,
    key: Option<String>,
    from: State,
    to: State,
    reason: TransitionReason,
    generation: u32,
    origin: Option<Arc<str>>,
    at_ms: u64,
}

/// The queue between the watcher and the sampler's task.
pub(crate) struct Transitions {
    queue: Mutex<VecDeque<Raw>>,
    capacity: usize,
    dropped: AtomicU64,
    /// The breaker names the admin shows (rows, keyed groups, annotated functions and named
    /// policies not yet built); transitions of other breakers are not queued.
    names: RwLock<HashSet<String>>,
    started: tokio::time::Instant,
}

impl Transitions {
    /// A queue of `capacity` transitions, and the watcher that fills it (unregistered when the
    /// [`Watch`] is dropped).
    pub(crate) fn watch(capacity: usize, started: tokio::time::Instant) -> (Arc<Self>, Watch) {
        let this = Arc::new(Transitions {
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
            names: RwLock::new(HashSet::new()),
            started,
        });
        let weak = Arc::downgrade(&this);
        let watch = watch_transitions(move |id, key, t| {
            if let Some(this) = weak.upgrade() {
                this.push(id, key, t);
            }
        });
        (this, watch)
    }

    fn push(&self, id: BreakerId, key: &str, t: &Transition) {
        let shown = self
            .names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&*t.name);
        if !shown {
            return;
        }
        let at_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut queue = lock(&self.queue);
        if queue.len() >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        queue.push_back(Raw {
            id,
            key: (!key.is_empty()).then(|| key.to_owned()),
            from: t.from,
            to: t.to,
            reason: t.reason,
            generation: t.generation,
            origin: t.origin.clone(),
            at_ms,
        });
    }

    /// Sets the breaker names whose transitions are queued.
    pub(crate) fn show(&self, names: HashSet<String>) {
        *self.names.write().unwrap_or_else(|e| e.into_inner()) = names;
    }

    /// Publishes every queued transition of a breaker in `items` (one event per row that shows
    /// it), then a `dropped` event if the queue was full meanwhile; returns how many events it
    /// published.
    pub(crate) fn forward(&self, items: &[Item], bus: &Bus, now_ms: u64) -> usize {
        let raws: Vec<Raw> = lock(&self.queue).drain(..).collect();
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        let mut published = 0;
        if !raws.is_empty() {
            // Rows by breaker identity; a keyed group's keys only when a transition is of no
            // row's own breaker (one pass over each group's keys per drain; a registry's
            // breakers need not carry their key).
            let mut rows: HashMap<BreakerId, Vec<(&str, Option<String>)>> = HashMap::new();
            for item in items {
                if let Some(b) = &item.breaker {
                    rows.entry(b.id()).or_default().push((&item.id, None));
                }
            }
            let wanted: HashSet<BreakerId> = raws
                .iter()
                .filter(|r| !rows.contains_key(&r.id))
                .map(|r| r.id)
                .collect();
            if !wanted.is_empty() {
                for item in items {
                    if let Some(keys) = &item.keys {
                        keys.for_each(&mut |key, b| {
                            if wanted.contains(&b.id()) {
                                rows.entry(b.id()).or_default().push((&item.id, Some(key)));
                            }
                        });
                    }
                }
            }
            for r in raws {
                let Some(shown) = rows.get(&r.id) else {
                    continue;
                };
                for (row, key) in shown {
                    bus.publish(Event::Transition {
                        breaker: (*row).to_owned(),
                        key: key.clone().or_else(|| r.key.clone()),
                        from: r.from.as_str(),
                        to: r.to.as_str(),
                        reason: r.reason.as_str(),
                        generation: r.generation,
                        origin: r.origin.as_deref().map(str::to_owned),
                        at_ms: r.at_ms,
                    });
                    published += 1;
                }
            }
        }
        if dropped > 0 {
            bus.publish(Event::Dropped {
                dropped,
                message: format!(
                    "the admin's transition queue was full: {dropped} transitions were \
                     dropped; reload the state from the status API"
                ),
                at_ms: now_ms,
            });
            published += 1;
        }
        published
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Keys, Kind, Source};
    use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
    use breaker_core::registry::Registry;

    fn row(id: &str, breaker: Option<&CircuitBreaker>, keys: Option<Arc<dyn Keys>>) -> Item {
        Item {
            id: id.to_owned(),
            kind: if keys.is_some() {
                Kind::Keyed
            } else {
                Kind::Plain
            },
            breaker: breaker.cloned(),
            keys,
            policy: None,
            source: Source::Code,
            layers: Vec::new(),
            used_by: Vec::new(),
            fleet: None,
        }
    }

    fn one_failure_trips() -> BreakerPolicy {
        BreakerPolicy {
            consecutive_failures: Some(1),
            ..BreakerPolicy::default()
        }
    }

    #[tokio::test]
    async fn each_transition_is_one_event_of_its_row_keys_included_and_strangers_left_out() {
        let (queue, _watch) = Transitions::watch(3, tokio::time::Instant::now());
        let bus = Bus::new(64, 4);
        let mut rx = bus.receiver();
        let shown = CircuitBreaker::builder(one_failure_trips())
            .name("transitions_test_plain")
            .build()
            .unwrap();
        // Same name, not shown: never confused with the one shown.
        let stranger = CircuitBreaker::builder(one_failure_trips())
            .name("transitions_test_plain")
            .build()
            .unwrap();
        let factory = CircuitBreaker::builder(one_failure_trips())
            .name("transitions_test_keys")
            .build_factory()
            .unwrap();
        let hosts: Registry<String> = Registry::new(factory);
        let items = [
            row("plain", Some(&shown), None),
            row("hosts", None, Some(Arc::new(hosts.clone()))),
        ];
        queue.show(
            ["transitions_test_plain", "transitions_test_keys"]
                .map(String::from)
                .into(),
        );
        shown.try_acquire().unwrap().failure();
        stranger.try_acquire().unwrap().failure();
        hosts
            .get_or_create("a.example")
            .unwrap()
            .try_acquire()
            .unwrap()
            .failure();
        assert_eq!(queue.forward(&items, &bus, 7), 2);
        // The admin clock's reading is not the point here.
        let events: Vec<Event> = (0..2)
            .map(|_| match rx.try_recv().unwrap().event.clone() {
                Event::Transition {
                    breaker,
                    key,
                    from,
                    to,
                    reason,
                    generation,
                    origin,
                    ..
                } => Event::Transition {
                    breaker,
                    key,
                    from,
                    to,
                    reason,
                    generation,
                    origin,
                    at_ms: 0,
                },
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            events,
            [
                Event::Transition {
                    breaker: "plain".into(),
                    key: None,
                    from: "closed",
                    to: "open",
                    reason: "consecutive_failures",
                    generation: 1,
                    origin: None,
                    at_ms: 0,
                },
                Event::Transition {
                    breaker: "hosts".into(),
                    key: Some("a.example".into()),
                    from: "closed",
                    to: "open",
                    reason: "consecutive_failures",
                    generation: 1,
                    origin: None,
                    at_ms: 0,
                },
            ]
        );
        // A queue of 3 (the stranger's transition took a place: its name is shown): the fourth
        // transition is dropped and counted, never blocking.
        shown.reset();
        shown.force_open();
        shown.force_closed();
        shown.reset();
        assert_eq!(queue.forward(&items, &bus, 9), 4);
        let last = (0..4).map(|_| rx.try_recv().unwrap().event.clone()).last();
        assert!(
            matches!(last, Some(Event::Dropped { dropped: 1, .. })),
            "{last:?}"
        );
    }
}
