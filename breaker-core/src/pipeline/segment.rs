//! A run of non-retry layers around a core, as straight-line code (see the macro's docs).

/// A run of non-retry layers (`$range` of the order, outermost first) around `$core`,
/// as one block whose value is the run's result. `$keyed` is the call's [`KeyLayers`]
/// (its breaker and rate limiter: the pipeline's own or a key's).
///
/// [`KeyLayers`]: super::KeyLayers
///
/// Breaker, bulkhead and timeout only act before and after what they wrap, so a run of
/// them is straight-line code, not one nested future per layer: entering the run takes each
/// layer's permit or limit in the declared order, leaving it releases them. A whole call is
/// then one `async fn` (the layers outside retry, the retry loop, the layers inside it),
/// which keeps its future small and its result from being moved from layer to layer. A
/// layer that refuses releases what the layers outside it took, and a breaker outside it
/// records the refusal as it would have seen it nested: a bulkhead rejection is ignored, a
/// deadline reached while waiting for a slot is a failure. The adaptive limit and throttling
/// learn nothing from a refusal: their permits are dropped unrecorded.
///
/// With `lazy`, the run encloses a single attempt and the timeout layer's limit is anchored
/// only when needed (see `Ctx::lazy`); without it, at the layer.
macro_rules! segment {
    ($self:ident, $keyed:ident, $range:expr, $ctx:ident, $class:ident, lazy = $lazy:expr, $core:expr) => {
        'segment: {
            let mut permit = None;
            let mut _slot = None;
            // The adaptive limit's and throttling's permits: given the outcome at the end, or
            // dropped unrecorded when a layer inside them refuses (a local refusal says
            // nothing about the dependency).
            let mut adaptive = None;
            let mut throttle = None;
            let mut $ctx = $ctx;
            for &layer in &$self.layers[$range] {
                let refused: Error<E> = match layer {
                    Layer::Timeout => {
                        if let Some(t) = $self.timeout {
                            $ctx = if $lazy {
                                $ctx.lazy()
                            } else {
                                $ctx.tighten(t, TimeoutKind::Attempt)
                            };
                        }
                        continue;
                    }
                    Layer::Breaker => {
                        let Some(breaker) = $keyed.breaker else {
                            continue;
                        };
                        match breaker.try_acquire() {
                            Ok(p) => {
                                permit = Some(Held {
                                    permit: p,
                                    metrics: metrics_of(&$self.metrics),
                                });
                                continue;
                            }
                            Err(r) => $self.rejected(r),
                        }
                    }
                    Layer::Bulkhead => {
                        let Some(bulkhead) = &$self.bulkhead else {
                            continue;
                        };
                        let slot = match bulkhead.try_acquire() {
                            Ok(slot) => Ok(slot),
                            // Boxed: the waiting path must not grow every call's future.
                            Err(_) => {
                                $ctx = $ctx.anchor($self.timeout);
                                Box::pin(bulkhead.acquire_until($ctx.limit().map(|l| l.at))).await
                            }
                        };
                        match slot {
                            Ok(slot) => {
                                _slot = Some(slot);
                                continue;
                            }
                            Err(Wait::Full(full)) => Error::Rejected(Rejection::Bulkhead(full)),
                            Err(Wait::Deadline) => match $ctx.limit() {
                                Some(l) => Error::Timeout($self.elapsed(l.kind)),
                                None => unreachable!("waits end early only at a limit"),
                            },
                        }
                    }
                    Layer::RateLimit => {
                        let Some(rate) = $keyed.rate else {
                            continue;
                        };
                        let got = match rate.try_acquire() {
                            Ok(()) => Ok(()),
                            Err(refused) if rate.policy().max_wait.is_zero() => Err(refused),
                            // Boxed: the waiting path must not grow every call's future.
                            Err(_) => {
                                $ctx = $ctx.anchor($self.timeout);
                                Box::pin(rate.acquire_until($ctx.limit().map(|l| l.at))).await
                            }
                        };
                        match got {
                            Ok(()) => continue,
                            Err(r) => $self.refused(Rejection::RateLimited(r)),
                        }
                    }
                    Layer::Adaptive => {
                        let Some(limiter) = &$self.adaptive else {
                            continue;
                        };
                        match limiter.try_acquire() {
                            Ok(p) => {
                                adaptive = Some(p);
                                continue;
                            }
                            Err(r) => $self.refused(Rejection::Limit(r)),
                        }
                    }
                    Layer::Throttle => {
                        let Some(throttler) = &$self.throttle else {
                            continue;
                        };
                        match throttler.try_acquire() {
                            Ok(p) => {
                                throttle = Some(p);
                                continue;
                            }
                            Err(r) => $self.refused(Rejection::Throttled(r)),
                        }
                    }
                    // Only the hedge layer of an operation not declared idempotent is ever in
                    // a segment: it makes one attempt, so it does nothing.
                    Layer::Hedge => continue,
                    Layer::Retry => unreachable!("retry is never inside a segment"),
                };
                if let Some(mut p) = permit.take() {
                    p.record(error_outcome::<T, E, _>(&refused, $class));
                }
                // The run outside retry (the one that is not lazy) refused: no attempt was
                // made, so the retry loop records none; the call is recorded here.
                if !$lazy && $self.recorder.is_some() {
                    $self.record_refusal::<T, E, _>(&refused, $class);
                }
                break 'segment Err(refused);
            }
            let result = $core;
            if let Some(p) = &mut permit {
                p.record(match &result {
                    Ok(v) => $class.outcome_of(Ok(v)),
                    Err(e) => error_outcome::<T, E, _>(e, $class),
                });
            }
            if adaptive.is_some() || throttle.is_some() {
                if let Some(outcome) = dependency_outcome::<T, E, _>(&result, $class) {
                    if let Some(p) = adaptive.take() {
                        p.record(outcome);
                    }
                    if let Some(p) = throttle.take() {
                        p.record(outcome);
                    }
                }
            }
            result
        }
    };
}
