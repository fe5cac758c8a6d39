//! The event stream: transitions, rejections, keyed groups' states, admin actions and reloads,
//! as server-sent events, with bounded buffering.
//!
//! # Why a broadcast ring, fed by the breakers' own transitions
//! Nothing here runs on a call's path. Each transition a breaker makes reaches the admin
//! through [`watch_transitions`](breaker_core::breaker::watch_transitions), on the thread that
//! made it: a push into a bounded queue (a transition, never a call; a full queue drops it and
//! counts it). The [sampler](crate::sampler)'s task drains that queue at each tick, publishing
//! one `transition` event per transition with the breaker's own from, to and reason, then adds
//! what only a reading shows (rejection counts, keyed groups' counts by state). Events go into
//! one ring of a fixed size ([`AdminBuilder::event_buffer`](crate::AdminBuilder::event_buffer)),
//! shared by every reader. Publishing never waits for a reader. A reader that falls behind by
//! more than the ring (its socket is slow, or it stopped reading) loses the oldest events it had
//! not read, and is told so with a `dropped` event carrying the count; its memory is its
//! connection's buffers and one cursor into the ring, whatever the number of events since.
//!
//! # The wire format
//! ```text
//! id: 42
//! event: transition
//! data: {"type":"transition","breaker":"inventory","from":"closed","to":"open",...}
//!
//! ```
//! Event names: `hello` (the first, with the sampling interval), `transition` (one per
//! transition), `rejections`, `keys`, `action`, `reload`, `heartbeat` (every 15 s, so idle
//! proxies keep the stream) and `dropped` (this reader fell behind, or the transition queue was
//! full).

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body::Frame;
use serde::Serialize;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

/// One event of the stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Event {
    /// One transition of one breaker, as the breaker made it (from its own transition
    /// event, through [`watch_transitions`](breaker_core::breaker::watch_transitions)): one
    /// event per transition, never merged.
    Transition {
        /// The row's id.
        breaker: String,
        /// The key, for a breaker of a keyed group; absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        from: &'static str,
        to: &'static str,
        /// Why, as the breaker said (`consecutive_failures`, `cooldown_elapsed`,
        /// `probe_failed`, `probes_succeeded`, `manual`, ...).
        reason: &'static str,
        /// The generation entered (it counts transitions, wrapping at 2^24).
        generation: u32,
        /// The replica whose decision was applied, for a shared breaker's transition decided
        /// elsewhere in the fleet; absent for one decided here.
        #[serde(skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
        /// The admin clock's reading when the breaker made the transition.
        at_ms: u64,
    },
    /// Transitions that the admin's queue had no room for (its readers are told, rather than
    /// shown a jump from one state to another the breaker never made).
    Dropped {
        dropped: u64,
        message: String,
        at_ms: u64,
    },
    /// Calls a breaker rejected since the previous sample (its lifetime totals must be on).
    Rejections {
        breaker: String,
        count: u64,
        /// The state the breaker is in now.
        state: &'static str,
        at_ms: u64,
    },
    /// A keyed group's breakers by state changed.
    Keys {
        breaker: String,
        keys: usize,
        by_state: crate::view::ByState,
        at_ms: u64,
    },
    /// An admin action was carried out.
    Action {
        breaker: String,
        key: Option<String>,
        action: &'static str,
        who: String,
        fleet: bool,
        at_ms: u64,
    },
    /// A policy registry was reloaded.
    Reload {
        ok: bool,
        /// The registry's reload generation now.
        generation: u64,
        changed: Vec<String>,
        at_ms: u64,
    },
    /// Nothing happened for a while.
    Heartbeat { at_ms: u64 },
}

impl Event {
    fn name(&self) -> &'static str {
        match self {
            Event::Transition { .. } => "transition",
            Event::Rejections { .. } => "rejections",
            Event::Keys { .. } => "keys",
            Event::Action { .. } => "action",
            Event::Reload { .. } => "reload",
            Event::Heartbeat { .. } => "heartbeat",
            Event::Dropped { .. } => "dropped",
        }
    }
}

/// An event with its sequence number, ready to write.
#[derive(Clone, Debug)]
pub(crate) struct Published {
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests
    pub(crate) event: Event,
    pub(crate) frame: Bytes,
}

/// The ring every reader reads.
pub(crate) struct Bus {
    tx: broadcast::Sender<Arc<Published>>,
    seq: AtomicU64,
    readers: AtomicUsize,
    max_readers: usize,
}

/// Too many readers already: [`Bus::subscribe`] refused.
#[derive(Debug)]
pub(crate) struct TooManyReaders(pub(crate) usize);

impl Bus {
    pub(crate) fn new(capacity: usize, max_readers: usize) -> Bus {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Bus {
            tx,
            seq: AtomicU64::new(0),
            readers: AtomicUsize::new(0),
            max_readers,
        }
    }

    /// Publishes `event` to every reader; never waits. Returns its sequence number.
    pub(crate) fn publish(&self, event: Event) -> u64 {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let data = serde_json::to_string(&event).expect("events serialise");
        let frame = Bytes::from(format!(
            "id: {seq}\nevent: {}\ndata: {data}\n\n",
            event.name()
        ));
        // No reader: nothing to do.
        let _ = self.tx.send(Arc::new(Published { event, frame }));
        seq
    }

    /// A receiver of the events published from now on.
    #[cfg(test)]
    pub(crate) fn receiver(&self) -> broadcast::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }

    /// The readers connected now.
    pub(crate) fn readers(&self) -> usize {
        self.readers.load(Ordering::Relaxed)
    }

    /// A new reader's stream of frames, starting with `hello`.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        hello: Bytes,
    ) -> Result<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static, TooManyReaders>
    {
        let max = self.max_readers;
        if self
            .readers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(TooManyReaders(max));
        }
        let guard = ReaderGuard(Arc::clone(self));
        let events = BroadcastStream::new(self.tx.subscribe()).map(move |item| {
            let _held = &guard;
            Ok(Frame::data(match item {
                Ok(p) => p.frame.clone(),
                Err(BroadcastStreamRecvError::Lagged(n)) => Bytes::from(format!(
                    "event: dropped\ndata: {{\"type\":\"dropped\",\"dropped\":{n},\"message\":\
                     \"this reader fell behind: {n} events were dropped; reload the state from \
                     the status API\"}}\n\n"
                )),
            }))
        });
        Ok(futures_util::stream::once(async move { Ok(Frame::data(hello)) }).chain(events))
    }
}

/// Counts a reader while its stream lives.
struct ReaderGuard(Arc<Bus>);

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        self.0.readers.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_that_falls_behind_is_told_how_many_events_it_lost() {
        let bus = Arc::new(Bus::new(4, 10));
        let mut stream = Box::pin(bus.subscribe(Bytes::from_static(b"hello\n\n")).unwrap());
        let first = stream.next().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"hello\n\n");
        for i in 0..10 {
            bus.publish(Event::Heartbeat { at_ms: i });
        }
        // The ring holds 4: the 6 oldest are gone, and the reader is told so first.
        let next = stream.next().await.unwrap().unwrap().into_data().unwrap();
        let text = std::str::from_utf8(&next).unwrap();
        assert!(text.starts_with("event: dropped\n"), "{text}");
        assert!(text.contains("\"dropped\":6"), "{text}");
        let next = stream.next().await.unwrap().unwrap().into_data().unwrap();
        assert!(std::str::from_utf8(&next)
            .unwrap()
            .starts_with("id: 7\nevent: heartbeat\ndata: {\"type\":\"heartbeat\",\"at_ms\":6}"));
        assert_eq!(bus.readers(), 1);
        drop(stream);
        assert_eq!(bus.readers(), 0);
    }

    #[test]
    fn readers_beyond_the_bound_are_refused() {
        let bus = Arc::new(Bus::new(4, 2));
        let a = bus.subscribe(Bytes::new()).ok();
        let b = bus.subscribe(Bytes::new()).ok();
        assert!(a.is_some() && b.is_some());
        assert!(matches!(
            bus.subscribe(Bytes::new()),
            Err(TooManyReaders(2))
        ));
        drop(a);
        assert!(bus.subscribe(Bytes::new()).is_ok());
    }
}
