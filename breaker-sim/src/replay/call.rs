//! One call's life in the simulation: its slot, entering and leaving each run of layers (the
//! call's, each attempt's, each hedged leg's), its attempts and legs, and how it ends.

use super::*;

/// How entering a run of layers went.
enum Step {
    /// Every layer admitted it.
    Done,
    /// A layer refused it (the run's permits are released).
    Refused(Ending),
    /// The rate limit's next permit is due at this instant, within the wait allowed: the run
    /// goes on at this layer then.
    Wait(u64, usize),
}

/// What a hedged group makes of a leg's end (the live `Verdict`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// An answer (a success, or an answer the classifier ignores): it ends the group.
    Accept,
    /// A failure or a timeout: kept while another leg may answer.
    Fail,
    /// A local refusal: kept only if nothing failed.
    Refused,
}

fn verdict(e: Ending) -> Verdict {
    match e {
        Ending::Ok
        | Ending::Error {
            outcome: Outcome::Ignored | Outcome::Success,
            ..
        } => Verdict::Accept,
        Ending::Error { .. } | Ending::Timeout => Verdict::Fail,
        Ending::Rejected(_) => Verdict::Refused,
    }
}

impl Sim {
    pub(super) fn alloc(&mut self, mut slot: Slot) -> u32 {
        match self.free.pop() {
            Some(i) => {
                let old = &mut self.slots[i as usize];
                slot.token = old.token;
                // Its legs' storage, cleared when it was freed.
                slot.legs = std::mem::take(&mut old.legs);
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The layers of a run: indices into the order.
    fn range(&self, level: Level) -> (usize, usize) {
        let len = self.layers.len();
        match level {
            Level::Call => (0, self.outer),
            Level::Attempt => (self.inner, self.hedge_at),
            Level::Leg(_) => ((self.hedge_at + 1).min(len), len),
        }
    }

    fn held(&mut self, slot: u32, level: Level) -> &mut Held {
        let s = &mut self.slots[slot as usize];
        match level {
            Level::Call => &mut s.call,
            Level::Attempt => &mut s.attempt,
            Level::Leg(k) => &mut s.legs[usize::from(k)].held,
        }
    }

    /// The earliest limit of a run and the runs around it.
    fn limit(&self, slot: u32, level: Level) -> u64 {
        let s = &self.slots[slot as usize];
        match level {
            Level::Call => s.call.limit,
            Level::Attempt => s.call.limit.min(s.attempt.limit),
            Level::Leg(k) => s
                .call
                .limit
                .min(s.attempt.limit)
                .min(s.legs[usize::from(k)].held.limit),
        }
    }

    /// Enters the run `level` of `slot` from the layer `from` (its first, or the rate layer
    /// after a wait) and goes on to what follows it: the first attempt after the call's run,
    /// the first leg after an attempt's, the dependency after a leg's.
    pub(super) fn proceed(&mut self, slot: u32, level: Level, from: usize) {
        let from = if from == usize::MAX {
            self.range(level).0
        } else {
            from
        };
        match self.enter(slot, level, from) {
            Step::Done => match level {
                Level::Call => self.start_attempt(slot),
                Level::Attempt => self.start_leg(slot, 0),
                Level::Leg(k) => self.reach(slot, k),
            },
            Step::Refused(r) => match level {
                Level::Call => self.finish_call(slot, r),
                Level::Attempt => self.attempt_done(slot, r),
                Level::Leg(k) => self.leg_done(slot, k, r),
            },
            Step::Wait(at, i) => {
                let i = u16::try_from(i).expect("an order of at most eight layers");
                self.schedule(at, slot, Kind::Resume(level, i));
            }
        }
    }

    /// Refuses the run: releases what it holds (the breaker records the refusal as ignored).
    fn refuse(&mut self, slot: u32, level: Level, by_breaker: bool) -> Step {
        let r = Ending::Rejected(by_breaker);
        self.release(slot, level, Some(r));
        Step::Refused(r)
    }

    fn enter(&mut self, slot: u32, level: Level, from: usize) -> Step {
        let now = self.now;
        let to = self.range(level).1;
        for i in from..to {
            match self.layers[i] {
                Layer::Timeout => {
                    if let Some(t) = self.timeout {
                        let h = self.held(slot, level);
                        h.limit = h.limit.min(now.saturating_add(t));
                    }
                }
                Layer::Breaker => {
                    let Some(b) = &self.breaker else { continue };
                    let acquired = b.try_acquire_owned();
                    self.transitions();
                    match acquired {
                        Ok(p) => self.held(slot, level).permit = Some(p),
                        Err(_) => return self.refuse(slot, level, true),
                    }
                }
                Layer::Bulkhead => {
                    let Some(max) = self.bulkhead else { continue };
                    if self.bulkhead_in_use >= max {
                        return self.refuse(slot, level, false);
                    }
                    self.bulkhead_in_use += 1;
                    self.held(slot, level).bulkhead = true;
                }
                Layer::Throttle => {
                    let Some(t) = &self.throttle else { continue };
                    match t.try_acquire_owned() {
                        Ok(p) => self.held(slot, level).throttle = Some(p),
                        Err(_) => return self.refuse(slot, level, false),
                    }
                }
                Layer::Adaptive => {
                    let Some(a) = &self.adaptive else { continue };
                    match a.try_acquire_owned() {
                        Ok(p) => self.held(slot, level).adaptive = Some(p),
                        Err(_) => return self.refuse(slot, level, false),
                    }
                }
                Layer::RateLimit => {
                    let Some(rate) = &self.rate else { continue };
                    let refused = match rate.try_acquire() {
                        Ok(()) => {
                            self.held(slot, level).wait_since = NEVER;
                            continue;
                        }
                        Err(refused) => refused,
                    };
                    let max_wait = duration_ns(rate.policy().max_wait);
                    if max_wait == 0 {
                        return self.refuse(slot, level, false);
                    }
                    // As the live layer: wait for the permit's instant if it comes within the
                    // wait and before every enclosing limit; otherwise refuse at once.
                    let limit = self.limit(slot, level);
                    let h = self.held(slot, level);
                    if h.wait_since == NEVER {
                        h.wait_since = now;
                    }
                    let give_up = h.wait_since.saturating_add(max_wait).min(limit);
                    let due = now.saturating_add(duration_ns(refused.retry_after));
                    if due > give_up {
                        return self.refuse(slot, level, false);
                    }
                    return Step::Wait(due, i);
                }
                Layer::Retry | Layer::Hedge => {}
            }
        }
        Step::Done
    }

    /// Leaves a run: records how it ended (`None`: a cancellation, recorded as nothing) in
    /// its breaker permit, throttling and adaptive limit (these two only what the dependency
    /// answered), and frees its bulkhead slot.
    pub(super) fn release(&mut self, slot: u32, level: Level, ending: Option<Ending>) {
        let outcome = ending.map(breaker_outcome);
        let answered = ending.and_then(answered);
        let h = self.held(slot, level);
        let permit = h.permit.take();
        let bulkhead = std::mem::take(&mut h.bulkhead);
        let throttle = h.throttle.take();
        let adaptive = h.adaptive.take();
        h.wait_since = NEVER;
        if bulkhead {
            self.bulkhead_in_use -= 1;
        }
        if let (Some(p), Some(o)) = (throttle, answered) {
            p.record(o);
        }
        if let (Some(p), Some(o)) = (adaptive, answered) {
            p.record(o);
        }
        if let Some(p) = permit {
            match outcome {
                Some(o) => p.record(o),
                None => drop(p),
            }
            self.transitions();
        }
    }

    /// Starts the next attempt of `slot` at the current instant.
    pub(super) fn start_attempt(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.attempts += 1;
        s.in_attempt = true;
        s.attempt = Held::new(NEVER);
        s.legs.clear();
        s.kept = None;
        self.proceed(slot, Level::Attempt, usize::MAX);
    }

    /// Whether the attempt of `slot` may start another leg now: hedging, a hedge left, and no
    /// enclosing limit reached.
    fn may_hedge(&self, slot: u32) -> bool {
        let Some(h) = &self.hedge else { return false };
        let s = &self.slots[slot as usize];
        s.legs.len() <= h.policy().max_hedges as usize
            && self.now < self.limit(slot, Level::Attempt)
    }

    /// Starts leg `k` of the attempt of `slot` (0: its first; then the hedges).
    pub(super) fn start_leg(&mut self, slot: u32, k: u16) {
        let now = self.now;
        let s = &mut self.slots[slot as usize];
        let attempt = s.attempts;
        s.legs.push(Leg {
            held: Held::new(NEVER),
            start: now,
            running: true,
            ending: Ending::Ok,
        });
        if k > 0 {
            self.counts.hedges += 1;
        }
        self.proceed(slot, Level::Leg(k), usize::MAX);
        // The next hedge's timer, if this leg is still the latest (as the live future, after
        // polling the legs, so a leg answering at the hedge's instant wins).
        let s = &self.slots[slot as usize];
        if !(s.in_attempt && s.attempts == attempt && s.legs.len() == usize::from(k) + 1) {
            return;
        }
        if let (Some(h), true) = (&self.hedge, self.may_hedge(slot)) {
            let at = now.saturating_add(duration_ns(h.delay()));
            if at < self.limit(slot, Level::Attempt) {
                self.schedule(at, slot, Kind::Hedge(k + 1));
            }
        }
    }

    /// The dependency's answer to a hedge starting now: the next line's answer (see the
    /// module's rules).
    fn hedge_answer(&self) -> Answer {
        if let Some((t, a)) = self.latest {
            if t == self.now {
                return a;
            }
        }
        match self.pending.get(self.next_known) {
            Some(c) if c.t_ns.saturating_sub(self.now) <= duration_ns(LOOK_AHEAD) => answer(c),
            _ => self.behaviour(),
        }
    }

    /// Leg `k` of `slot` passed its layers: it reaches the dependency now.
    fn reach(&mut self, slot: u32, k: u16) {
        let now = self.now;
        let s = &self.slots[slot as usize];
        let answer = match (k, s.attempts, s.own) {
            (0, 1, Some(a)) => a,
            (0, _, _) => self.behaviour(),
            _ => self.hedge_answer(),
        };
        self.counts.reached += 1;
        let limit = self.limit(slot, Level::Leg(k));
        let hangs = answer.outcome == CallOutcome::Timeout;
        let due = if hangs {
            NEVER
        } else {
            now.saturating_add(answer.latency_ns)
        };
        let (end, ending) = if due <= limit && due != NEVER {
            (due, answer_result(answer))
        } else if limit != NEVER {
            (limit, Ending::Timeout)
        } else {
            // A hang without any limit: it fails where the trace's knowledge ends.
            (
                now.saturating_add(answer.latency_ns),
                Ending::Error {
                    outcome: Outcome::Failure,
                    transient: true,
                },
            )
        };
        self.slots[slot as usize].legs[usize::from(k)].ending = ending;
        self.schedule(end, slot, Kind::LegEnd(k));
    }

    /// Leg `k` of `slot` ends as it was due to: a failure reached the dependency (not for a
    /// leg dropped before, a hedge's loser or a cancelled call's).
    pub(super) fn leg_end(&mut self, slot: u32, k: u16) {
        let ending = self.slots[slot as usize].legs[usize::from(k)].ending;
        if matches!(
            ending,
            Ending::Timeout
                | Ending::Error {
                    outcome: Outcome::Failure,
                    ..
                }
        ) {
            self.counts.failures_reached += 1;
        }
        self.leg_done(slot, k, ending);
    }

    /// Leg `k` of `slot` ended with `ending` (an answer, a timeout, or a refusal by a layer
    /// inside hedge): the hedged group's rules (the live `Hedged` future).
    fn leg_done(&mut self, slot: u32, k: u16, ending: Ending) {
        self.release(slot, Level::Leg(k), Some(ending));
        let leg = &mut self.slots[slot as usize].legs[usize::from(k)];
        leg.running = false;
        let start = leg.start;
        let Some(hedge) = &self.hedge else {
            self.attempt_done(slot, ending);
            return;
        };
        let v = verdict(ending);
        if v == Verdict::Accept {
            hedge.record_latency(Duration::from_nanos(self.now - start));
            self.attempt_done(slot, ending);
            return;
        }
        let s = &mut self.slots[slot as usize];
        let keep = match s.kept {
            None => true,
            Some(kept) => v == Verdict::Fail || verdict(kept) == Verdict::Refused,
        };
        if keep {
            s.kept = Some(ending);
        }
        // A failed leg: the next hedge goes out now rather than after the delay (a refused
        // one starts none, as live).
        if v == Verdict::Fail && self.may_hedge(slot) {
            let next = self.slots[slot as usize].legs.len();
            self.start_leg(slot, u16::try_from(next).expect("at most 11 legs"));
            return;
        }
        let s = &self.slots[slot as usize];
        if !s.legs.iter().any(|l| l.running) {
            let kept = s.kept.unwrap_or(ending);
            self.attempt_done(slot, kept);
        }
    }

    /// Drops the legs of `slot` still running (a hedge's losers, or a cancelled call's):
    /// their permits are released as cancellations.
    fn drop_legs(&mut self, slot: u32) {
        for k in 0..self.slots[slot as usize].legs.len() {
            if self.slots[slot as usize].legs[k].running {
                self.slots[slot as usize].legs[k].running = false;
                self.release(slot, Level::Leg(k as u16), None);
            }
        }
    }

    /// The attempt of `slot` ended with `r`: its run records it, and retry decides.
    fn attempt_done(&mut self, slot: u32, r: Ending) {
        self.drop_legs(slot);
        self.release(slot, Level::Attempt, Some(r));
        self.slots[slot as usize].in_attempt = false;
        self.after(slot, r);
    }

    /// What follows an attempt that ended with `r` (the pipeline's retry rules).
    pub(super) fn after(&mut self, slot: u32, r: Ending) {
        if !self.has_retry || r == Ending::Ok {
            self.finish_call(slot, r);
            return;
        }
        let now = self.now;
        let s = &mut self.slots[slot as usize];
        let outer_limit = s.call.limit;
        let transient = match r {
            Ending::Error { transient, .. } => transient,
            Ending::Timeout => now < outer_limit,
            _ => false,
        };
        if !transient || s.attempts >= self.max_attempts {
            self.finish_call(slot, r);
            return;
        }
        let (retry, seed, index) = (self.retry, self.seed, s.index);
        let delay = s
            .delays
            .get_or_insert_with(|| {
                let rng = SmallRng::seed_from_u64(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                Box::new(retry.delays(rng))
            })
            .next()
            .unwrap_or(Duration::ZERO);
        let delay = duration_ns(delay);
        if outer_limit != NEVER && delay > outer_limit - now {
            self.finish_call(slot, r);
            return;
        }
        if delay == 0 {
            self.start_attempt(slot);
        } else {
            self.schedule(now.saturating_add(delay), slot, Kind::Retry);
        }
    }

    /// The call of `slot` ends with `r`: the call's run records it, the call is counted.
    pub(super) fn finish_call(&mut self, slot: u32, r: Ending) {
        self.release(slot, Level::Call, Some(r));
        let s = &self.slots[slot as usize];
        let kind = match r {
            Ending::Ok => 0,
            Ending::Rejected(by_breaker) => {
                self.counts.rejected += 1;
                // A good call refused by any local layer costs availability; the breaker's
                // share is also counted on its own.
                if s.would_succeed {
                    self.counts.successes_refused += 1;
                    if by_breaker {
                        self.counts.successes_rejected += 1;
                    }
                }
                2
            }
            _ => 1,
        };
        match kind {
            0 => self.counts.succeeded += 1,
            1 => self.counts.failed += 1,
            _ => {}
        }
        if kind < 2 {
            self.counts.latency(self.now - s.arrival);
        }
        if let Some(t) = &mut self.timeline {
            t.add(s.arrival, kind);
        }
        self.free_slot(slot);
    }

    pub(super) fn cancel(&mut self, slot: u32) {
        self.drop_legs(slot);
        self.release(slot, Level::Attempt, None);
        self.release(slot, Level::Call, None);
        self.counts.cancelled += 1;
        let arrival = self.slots[slot as usize].arrival;
        if let Some(t) = &mut self.timeline {
            t.add(arrival, 3);
        }
        self.free_slot(slot);
    }

    pub(super) fn free_slot(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.token = s.token.wrapping_add(1);
        s.delays = None;
        s.legs.clear();
        s.in_attempt = false;
        self.free.push(slot);
    }
}

fn answer_result(a: Answer) -> Ending {
    match a.outcome {
        CallOutcome::Success => Ending::Ok,
        CallOutcome::Ignored => Ending::Error {
            outcome: Outcome::Ignored,
            transient: a.transient,
        },
        _ => Ending::Error {
            outcome: Outcome::Failure,
            transient: a.transient,
        },
    }
}

/// What a breaker records for an ending: a refusal by a layer inside it is ignored.
fn breaker_outcome(ending: Ending) -> Outcome {
    match ending {
        Ending::Ok => Outcome::Success,
        Ending::Error { outcome, .. } => outcome,
        Ending::Timeout => Outcome::Failure,
        Ending::Rejected(_) => Outcome::Ignored,
    }
}

/// What the dependency answered, for throttling and the adaptive limit: nothing for a local
/// refusal.
fn answered(ending: Ending) -> Option<Outcome> {
    match ending {
        Ending::Ok => Some(Outcome::Success),
        Ending::Error { outcome, .. } => Some(outcome),
        Ending::Timeout => Some(Outcome::Failure),
        Ending::Rejected(_) => None,
    }
}
