//! [`Hedged`]: the future of a hedged call.

use super::runtime::{Inner, Verdict};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::time::{Instant, Sleep};

pin_project_lite::pin_project! {
    /// The future of a hedged call ([`Hedge::run`](super::Hedge::run)): the attempts in
    /// flight, the timer of the next hedge, and the failure kept in case nothing answers.
    /// Dropping it cancels every attempt in flight.
    #[must_use = "futures do nothing unless polled"]
    pub struct Hedged<'h, F, Fut: Future, A> {
        // Nothing is pinned: the attempts are boxed.
        state: State<'h, F, Fut, A>,
    }
}

struct State<'h, F, Fut: Future, A> {
    hedge: &'h Inner,
    make: F,
    accept: A,
    running: Vec<(Pin<Box<Fut>>, Instant)>,
    started: u32,
    /// When the last attempt started.
    last_start: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
    kept: Option<(Fut::Output, Verdict)>,
    /// No hedge starts at or after this instant (an enclosing limit).
    limit: Option<Instant>,
}

impl<'h, F, Fut, A> Hedged<'h, F, Fut, A>
where
    F: FnMut(u32) -> Fut,
    Fut: Future,
    A: FnMut(&Fut::Output) -> Verdict,
{
    pub(crate) fn new(hedge: &'h Inner, make: F, accept: A, limit: Option<Instant>) -> Self {
        Hedged {
            state: State {
                hedge,
                make,
                accept,
                running: Vec::new(),
                started: 0,
                last_start: None,
                timer: None,
                kept: None,
                limit,
            },
        }
    }
}

impl<F, Fut, A> State<'_, F, Fut, A>
where
    F: FnMut(u32) -> Fut,
    Fut: Future,
{
    /// Whether another attempt may start at `now`.
    fn may_start(&self, now: Instant) -> bool {
        self.started <= self.hedge.policy.max_hedges && self.limit.map_or(true, |l| now < l)
    }

    fn start(&mut self, now: Instant) {
        let attempt = self.started;
        self.started += 1;
        if attempt > 0 {
            crate::observe::hedge(&self.hedge.name);
        }
        self.running.push((Box::pin((self.make)(attempt)), now));
        self.last_start = Some(now);
        self.timer = None;
    }
}

impl<F, Fut, A> Future for Hedged<'_, F, Fut, A>
where
    F: FnMut(u32) -> Fut,
    Fut: Future,
    A: FnMut(&Fut::Output) -> Verdict,
{
    type Output = Fut::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Fut::Output> {
        let this = self.project().state;
        if this.started == 0 {
            this.start(Instant::now());
        }
        'poll: loop {
            let mut i = 0;
            while i < this.running.len() {
                let Poll::Ready(out) = this.running[i].0.as_mut().poll(cx) else {
                    i += 1;
                    continue;
                };
                let (_, began) = this.running.swap_remove(i);
                let now = Instant::now();
                let verdict = (this.accept)(&out);
                match verdict {
                    Verdict::Accept => {
                        this.hedge.record(now.saturating_duration_since(began));
                        // Returning drops `running` with the future: the others are cancelled.
                        this.running.clear();
                        return Poll::Ready(out);
                    }
                    _ => {
                        let keep = match &this.kept {
                            None => true,
                            Some((_, kept)) => {
                                verdict == Verdict::Fail || *kept == Verdict::Refused
                            }
                        };
                        if keep {
                            this.kept = Some((out, verdict));
                        }
                    }
                }
                // A failed attempt: the next hedge goes out now rather than after the delay. A
                // refused one starts none: a layer inside the hedge refused it locally (an open
                // breaker, a rate limit, throttling), and another attempt now would only be
                // refused too, and counted by the layer that refused it.
                if verdict == Verdict::Fail && this.may_start(now) {
                    this.start(now);
                    continue 'poll;
                }
            }
            if this.running.is_empty() {
                let (out, _) = this
                    .kept
                    .take()
                    .expect("an attempt ended with a kept result");
                return Poll::Ready(out);
            }
            let now = Instant::now();
            if !this.may_start(now) {
                return Poll::Pending;
            }
            let at = this.last_start.unwrap_or(now) + this.hedge.delay();
            if this.limit.is_some_and(|l| at >= l) {
                return Poll::Pending;
            }
            let timer = this
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.start(Instant::now());
        }
    }
}

impl<F, Fut: Future, A> fmt::Debug for Hedged<'_, F, Fut, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedged")
            .field("started", &self.state.started)
            .field("running", &self.state.running.len())
            .finish_non_exhaustive()
    }
}
