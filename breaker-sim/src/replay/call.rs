//! One call's life in the simulation: its slot, entering and leaving each layer (breaker
//! permits, retry delays, the deadline), its attempts and how it ends.

use super::*;

impl Sim {
    pub(super) fn alloc(&mut self, mut slot: Slot) -> u32 {
        match self.free.pop() {
            Some(i) => {
                slot.token = self.slots[i as usize].token;
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Enters the layers `from..to` of the order for `slot`: the outer run (`outer = true`
    /// when `from == 0` and there is a retry layer) or an attempt's run.
    pub(super) fn enter(&mut self, slot: u32, from: usize, to: usize) -> Result<(), Ending> {
        let outer = self.has_retry && from == 0;
        let now = self.now;
        for i in from..to {
            match self.layers[i] {
                Layer::Timeout => {
                    if let (Some(t), true) = (self.timeout, outer) {
                        let s = &mut self.slots[slot as usize];
                        s.outer_limit = s.outer_limit.min(now.saturating_add(t));
                    }
                }
                Layer::Breaker => {
                    let Some(b) = &self.breaker else { continue };
                    let acquired = b.try_acquire_owned();
                    self.transitions();
                    match acquired {
                        Ok(p) => {
                            let s = &mut self.slots[slot as usize];
                            if outer {
                                s.outer_permit = Some(p);
                            } else {
                                s.inner_permit = Some(p);
                            }
                        }
                        Err(_) => {
                            self.end_throttle(slot, outer, None);
                            self.release(slot, outer, Some(Outcome::Ignored));
                            return Err(Ending::Rejected(true));
                        }
                    }
                }
                Layer::Bulkhead => {
                    let Some(max) = self.bulkhead else { continue };
                    if self.bulkhead_in_use >= max {
                        self.end_throttle(slot, outer, None);
                        self.release(slot, outer, Some(Outcome::Ignored));
                        return Err(Ending::Rejected(false));
                    }
                    self.bulkhead_in_use += 1;
                    let s = &mut self.slots[slot as usize];
                    if outer {
                        s.outer_slot = true;
                    } else {
                        s.inner_slot = true;
                    }
                }
                Layer::Throttle => {
                    let Some(t) = &self.throttle else { continue };
                    match t.try_acquire_owned() {
                        Ok(p) => {
                            let s = &mut self.slots[slot as usize];
                            if outer {
                                s.outer_throttle = Some(p);
                            } else {
                                s.inner_throttle = Some(p);
                            }
                        }
                        Err(_) => {
                            self.end_throttle(slot, outer, None);
                            self.release(slot, outer, Some(Outcome::Ignored));
                            return Err(Ending::Rejected(false));
                        }
                    }
                }
                Layer::Retry => {}
                // Not replayed yet (see the crate docs): the replay runs as without them.
                Layer::RateLimit | Layer::Hedge | Layer::Adaptive => {}
            }
        }
        Ok(())
    }

    /// Leaves the outer run (`outer`) or an attempt's run: records `outcome` in its breaker
    /// permit (`None`: a cancellation) and frees its bulkhead slot.
    pub(super) fn release(&mut self, slot: u32, outer: bool, outcome: Option<Outcome>) {
        let s = &mut self.slots[slot as usize];
        let (permit, held) = if outer {
            (s.outer_permit.take(), std::mem::take(&mut s.outer_slot))
        } else {
            (s.inner_permit.take(), std::mem::take(&mut s.inner_slot))
        };
        if held {
            self.bulkhead_in_use -= 1;
        }
        if let Some(p) = permit {
            match outcome {
                Some(o) => p.record(o),
                None => drop(p),
            }
            self.transitions();
        }
    }

    /// Ends the throttling admission of the outer run or of the attempt: what the dependency
    /// answered (`None`: nothing it answered, a local refusal or a cancellation, is not
    /// counted, as in the live layer).
    pub(super) fn end_throttle(&mut self, slot: u32, outer: bool, outcome: Option<Outcome>) {
        let s = &mut self.slots[slot as usize];
        let permit = if outer {
            s.outer_throttle.take()
        } else {
            s.inner_throttle.take()
        };
        if let (Some(p), Some(o)) = (permit, outcome) {
            p.record(o);
        }
    }

    /// Starts an attempt of `slot` at the current instant.
    pub(super) fn attempt(&mut self, slot: u32) {
        let now = self.now;
        if let Err(r) = self.enter(slot, self.inner, self.layers.len()) {
            self.after(slot, r);
            return;
        }
        let s = &mut self.slots[slot as usize];
        let first = s.attempts == 0;
        s.attempts += 1;
        let answer = match (first, s.own) {
            (true, Some(a)) => a,
            _ => self.behaviour(),
        };
        self.counts.reached += 1;
        let attempt_limit = match self.timeout {
            Some(t) if self.timeout_inner => now.saturating_add(t),
            _ => NEVER,
        };
        let s = &mut self.slots[slot as usize];
        let limit = s.outer_limit.min(attempt_limit);
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
        if matches!(ending, Ending::Timeout)
            || matches!(
                ending,
                Ending::Error {
                    outcome: Outcome::Failure,
                    ..
                }
            )
        {
            self.counts.failures_reached += 1;
        }
        s.ending = ending;
        self.schedule(end, slot, Kind::AttemptEnd);
    }

    pub(super) fn attempt_end(&mut self, slot: u32) {
        let ending = self.slots[slot as usize].ending;
        let outcome = match ending {
            Ending::Ok => Outcome::Success,
            Ending::Error { outcome, .. } => outcome,
            Ending::Timeout => Outcome::Failure,
            Ending::Rejected(_) => Outcome::Ignored,
        };
        self.end_throttle(slot, false, answered(ending));
        self.release(slot, false, Some(outcome));
        self.after(slot, ending);
    }

    /// What follows an attempt that ended with `r` (the pipeline's retry rules).
    pub(super) fn after(&mut self, slot: u32, r: Ending) {
        if !self.has_retry || r == Ending::Ok {
            self.finish_call(slot, r);
            return;
        }
        let now = self.now;
        let s = &mut self.slots[slot as usize];
        let transient = match r {
            Ending::Error { transient, .. } => transient,
            Ending::Timeout => now < s.outer_limit,
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
        let delay = u64::try_from(delay.as_nanos()).unwrap_or(NEVER);
        if s.outer_limit != NEVER && delay > s.outer_limit - now {
            self.finish_call(slot, r);
            return;
        }
        if delay == 0 {
            self.attempt(slot);
        } else {
            self.schedule(now.saturating_add(delay), slot, Kind::Retry);
        }
    }

    /// The call of `slot` ends with `r`: the outer run records it, the call is counted.
    pub(super) fn finish_call(&mut self, slot: u32, r: Ending) {
        let outcome = match r {
            Ending::Ok => Outcome::Success,
            Ending::Error { outcome, .. } => outcome,
            Ending::Timeout => Outcome::Failure,
            Ending::Rejected(_) => Outcome::Ignored,
        };
        self.end_throttle(slot, true, answered(r));
        self.release(slot, true, Some(outcome));
        let s = &self.slots[slot as usize];
        let kind = match r {
            Ending::Ok => 0,
            Ending::Rejected(by_breaker) => {
                self.counts.rejected += 1;
                if by_breaker && s.would_succeed {
                    self.counts.successes_rejected += 1;
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
        if let Some(t) = &mut self.timeline {
            t.add(s.arrival, kind);
        }
        self.free_slot(slot);
    }

    pub(super) fn cancel(&mut self, slot: u32) {
        self.end_throttle(slot, false, None);
        self.end_throttle(slot, true, None);
        self.release(slot, false, None);
        self.release(slot, true, None);
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

/// What the dependency answered, for throttling: nothing for a local refusal.
fn answered(ending: Ending) -> Option<Outcome> {
    match ending {
        Ending::Ok => Some(Outcome::Success),
        Ending::Error { outcome, .. } => Some(outcome),
        Ending::Timeout => Some(Outcome::Failure),
        Ending::Rejected(_) => None,
    }
}
