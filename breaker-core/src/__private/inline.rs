//! The policy written in the attribute's options: built at compile time to report invalid
//! values, and again at run time from the same literals.

use crate::adaptive::{AdaptiveLimitPolicy, LimitAlgorithm};
use crate::breaker::{BreakerPolicy, SlidingWindow};
use crate::dsl::{self, DslError};
use crate::field::AttrOption;
use crate::hedge::HedgePolicy;
use crate::layer::{Layer, OrderError};
use crate::policy::defaults::{self, BULKHEAD_MAX_WAIT};
use crate::policy::{policy_errors, BulkheadPolicy, Field, FieldError, Policy, Rule};
use crate::ratelimit::RateLimitPolicy;
use crate::retry::RetryPolicy;
use crate::throttle::ThrottlePolicy;
use std::time::Duration;

/// The attribute's policy options, as written (literals only). See the [module docs](super).
#[derive(Clone, Copy, Debug, Default)]
pub struct InlinePolicy<'a> {
    /// `threshold = N`.
    pub threshold: Option<u64>,
    /// `failure_rate = P` (percent).
    pub failure_rate: Option<f64>,
    /// `window = N` (calls).
    pub window_calls: Option<u64>,
    /// `window = "D"` or `window = "D in N buckets"` (a time window; also `"N calls"`), as
    /// [`dsl::parse_window`] reads it.
    pub window_time: Option<&'a str>,
    /// `min_calls = N`.
    pub min_calls: Option<u64>,
    /// `cooldown = "D"`.
    pub cooldown: Option<&'a str>,
    /// `half_open_probes = N`.
    pub half_open_probes: Option<u64>,
    /// `retry = "spec"`.
    pub retry: Option<&'a str>,
    /// `idempotent = bool`.
    pub idempotent: Option<bool>,
    /// `timeout = "D"`.
    pub timeout: Option<&'a str>,
    /// `deadline = "D"`.
    pub deadline: Option<&'a str>,
    /// `concurrency = N`.
    pub concurrency: Option<u64>,
    /// `rate = "spec"` (a rate limit, [`dsl::parse_rate`]).
    pub rate: Option<&'a str>,
    /// `hedge = "spec"` (hedging, [`dsl::parse_hedge`]).
    pub hedge: Option<&'a str>,
    /// `adaptive = "spec"` (an adaptive concurrency limit, [`dsl::parse_adaptive`]).
    pub adaptive: Option<&'a str>,
    /// `throttle = "spec"` (client-side adaptive throttling, [`dsl::parse_throttle`]).
    pub throttle: Option<&'a str>,
    /// `order = [..]`, the layer names as written.
    pub order: Option<&'a [&'a str]>,
    /// `scope = ".."` (its syntax checked by the macro with the same parser): the fleet's
    /// rules of the one validator apply to a shared scope.
    pub scope: Option<&'a str>,
}

/// One invalid option value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The option that set the value; `None` for a value no option sets (a default), which
    /// the macro shows at the attribute as a whole.
    pub option: Option<AttrOption>,
    /// For `order`: the index of the offending item, if the error is about one item.
    pub item: Option<usize>,
    /// What is wrong and what is accepted, lowercase.
    pub message: String,
}

fn err(option: AttrOption, message: impl Into<String>) -> OptionError {
    OptionError {
        option: Some(option),
        item: None,
        message: message.into(),
    }
}

fn dsl_err(option: AttrOption, src: &str, e: &DslError) -> OptionError {
    err(option, literal_error(option.name(), src, e))
}

/// The error `e` of the DSL string literal `src` of the attribute's option `option`, as the
/// macro shows it: under the whole literal, since stable `proc_macro` cannot point inside one.
/// So the message quotes the literal and, when the offending fragment is a part of it, gives
/// the fragment's byte range in the literal, as the DSL's `Display` does everywhere:
/// ``invalid retry `3x expo`: unknown backoff `expo` at 3..7; expected one of ...``.
pub fn literal_error(option: &str, src: &str, e: &DslError) -> String {
    if e.span == (0..src.len()) {
        format!("invalid {option} `{src}`: {}", e.describe())
    } else {
        format!("invalid {option} `{src}`: {e}")
    }
}

fn u32_of(option: AttrOption, n: u64, errors: &mut Vec<OptionError>) -> Option<u32> {
    match u32::try_from(n) {
        Ok(n) => Some(n),
        Err(_) => {
            errors.push(err(
                option,
                format!("`{option}` is too large: {n} > {}", u32::MAX),
            ));
            None
        }
    }
}

impl InlinePolicy<'_> {
    /// No option given.
    pub const EMPTY: InlinePolicy<'static> = InlinePolicy {
        threshold: None,
        failure_rate: None,
        window_calls: None,
        window_time: None,
        min_calls: None,
        cooldown: None,
        half_open_probes: None,
        retry: None,
        idempotent: None,
        timeout: None,
        deadline: None,
        concurrency: None,
        rate: None,
        hedge: None,
        adaptive: None,
        throttle: None,
        order: None,
        scope: None,
    };

    /// Builds and validates the whole policy, returning every error at once.
    ///
    /// Defaults: the breaker trips after 5 consecutive failures unless `failure_rate` is given
    /// (then it trips on the rate alone), stays open 30 s, admits 1 probe. Writing `retry` is
    /// itself the opt-in to re-running the function, so it implies `idempotent = true`;
    /// `idempotent = false` together with a retry of more than one attempt is an error (case
    /// BR-35). Without `order`, the configured layers nest in [`Layer::DEFAULT_ORDER`].
    ///
    /// The values are checked by [`Policy::validate`]'s validator; this only adds the
    /// attribute's own rules (`window` and `min_calls` need `failure_rate`) and words the
    /// errors for the attribute: errors about values that parsed, in the order the options
    /// are checked, the `order` items next, then the validator's other errors.
    ///
    /// # Errors
    /// Every invalid value, each with the option that set it.
    pub fn build(&self) -> Result<Policy, Vec<OptionError>> {
        let mut errors = Vec::new();
        let breaker = self.breaker(&mut errors);
        // A layer whose value did not parse is still configured (with a placeholder), so that
        // `order` is judged as written; the value's own error is already recorded.
        let retry = self.retry.map(|src| match dsl::parse_retry(src) {
            Ok(r) => r,
            Err(e) => {
                errors.push(dsl_err(AttrOption::Retry, src, &e));
                RetryPolicy::NONE
            }
        });
        let mut duration = |option: AttrOption, src: Option<&str>| {
            src.and_then(|src| match dsl::parse_duration(src) {
                Ok(d) => Some(d),
                Err(e) => {
                    errors.push(dsl_err(option, src, &e));
                    None
                }
            })
        };
        let timeout = duration(AttrOption::Timeout, self.timeout);
        let deadline = duration(AttrOption::Deadline, self.deadline);
        let bulkhead = self.concurrency.map(|n| BulkheadPolicy {
            max_concurrent: u32_of(AttrOption::Concurrency, n, &mut errors).unwrap_or(1),
            max_wait: BULKHEAD_MAX_WAIT,
        });
        // The layers written as DSL strings: a value that does not parse leaves a placeholder,
        // as for `retry`.
        fn layer<T>(
            option: AttrOption,
            src: Option<&str>,
            parse: fn(&str) -> Result<T, DslError>,
            placeholder: T,
            errors: &mut Vec<OptionError>,
        ) -> Option<T> {
            src.map(|src| match parse(src) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(dsl_err(option, src, &e));
                    placeholder
                }
            })
        }
        let rate_limit = layer(
            AttrOption::Rate,
            self.rate,
            dsl::parse_rate,
            RateLimitPolicy::per_second(1),
            &mut errors,
        );
        let hedge = layer(
            AttrOption::Hedge,
            self.hedge,
            dsl::parse_hedge,
            HedgePolicy::after(Duration::from_millis(1)),
            &mut errors,
        );
        let adaptive = layer(
            AttrOption::Adaptive,
            self.adaptive,
            dsl::parse_adaptive,
            AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 1, 1),
            &mut errors,
        );
        let throttle = layer(
            AttrOption::Throttle,
            self.throttle,
            dsl::parse_throttle,
            ThrottlePolicy::default(),
            &mut errors,
        );
        // The positions of the known layer names among the items as written.
        let mut order_errors = Vec::new();
        let (order, items) = match self.order {
            None => (None, Vec::new()),
            Some(names) => {
                let (mut layers, mut items) = (Vec::new(), Vec::new());
                for (i, name) in names.iter().enumerate() {
                    match Layer::from_name(name) {
                        Some(l) => {
                            layers.push(l);
                            items.push(i);
                        }
                        None => order_errors.push(OptionError {
                            option: Some(AttrOption::Order),
                            item: Some(i),
                            message: format!(
                                "unknown layer `{name}` in `order`; expected one of {}",
                                Layer::names_in_default_order()
                            ),
                        }),
                    }
                }
                (Some(layers), items)
            }
        };
        let mut policy = Policy {
            breaker: Some(breaker),
            retry,
            // A timeout that did not parse is configured too (see `retry`); its placeholder is
            // never compared with the deadline: errors of options in error are dropped below.
            timeout: timeout.or(self.timeout.map(|_| Duration::from_secs(1))),
            deadline,
            bulkhead,
            rate_limit,
            hedge,
            adaptive,
            throttle,
            order,
            // Writing `retry` or `hedge` is the opt-in to running the function more than once.
            idempotent: self
                .idempotent
                .unwrap_or(self.retry.is_some() || self.hedge.is_some()),
            scope: self.scope.and_then(|s| s.parse().ok()).unwrap_or_default(),
        };
        let mut missing = Vec::new();
        let mut others: Vec<OptionError> = Vec::new();
        for e in policy_errors(&policy) {
            if let Some(problem) = e.order() {
                match problem {
                    OrderError::Missing { layer } => missing.push(layer),
                    _ => order_errors.push(OptionError {
                        option: Some(AttrOption::Order),
                        item: problem.at().map(|at| items[at]),
                        message: order_message(problem),
                    }),
                }
                continue;
            }
            let option = match e.rule {
                Rule::Idempotent => Some(AttrOption::Idempotent),
                _ => AttrOption::of_field(e.field),
            };
            let involved = match e.rule {
                Rule::TimeoutWithinDeadline => vec![AttrOption::Timeout, AttrOption::Deadline],
                _ => option.into_iter().collect(),
            };
            // One error per option: a value that did not parse already has its error (the
            // placeholder left in its place must not add another), and so has a value the
            // validator already reported.
            let reported =
                |o: &AttrOption| errors.iter().chain(&others).any(|e| e.option == Some(*o));
            if !involved.iter().any(reported) {
                others.push(field_message(e, option));
            }
        }
        order_errors.sort_by_key(|e| e.item);
        if order_errors.is_empty() && !missing.is_empty() {
            let missing: Vec<String> = missing.iter().map(|l| format!("`{l}`")).collect();
            order_errors.push(err(
                AttrOption::Order,
                format!(
                    "`order` must place every configured layer, outermost first; it leaves out {}",
                    missing.join(", ")
                ),
            ));
        }
        errors.append(&mut order_errors);
        errors.append(&mut others);
        if errors.is_empty() {
            policy.order = Some(policy.effective_order());
            Ok(policy)
        } else {
            Err(errors)
        }
    }

    /// The breaker of the options, recording the errors of values that do not parse and of
    /// the attribute's own rules.
    fn breaker(&self, errors: &mut Vec<OptionError>) -> BreakerPolicy {
        let mut breaker = BreakerPolicy::default();
        if let Some(n) = self.threshold {
            breaker.consecutive_failures = u32_of(AttrOption::Threshold, n, errors);
        } else if self.failure_rate.is_some() {
            breaker.consecutive_failures = None;
        }
        breaker.failure_rate_percent = self.failure_rate;
        if self.failure_rate.is_none() {
            for (given, option) in [
                (
                    self.window_calls.is_some() || self.window_time.is_some(),
                    AttrOption::Window,
                ),
                (self.min_calls.is_some(), AttrOption::MinCalls),
            ] {
                if given {
                    errors.push(err(
                        option,
                        format!(
                            "`{option}` has no effect without `failure_rate`; add `failure_rate` \
                             or remove `{option}`"
                        ),
                    ));
                }
            }
        }
        if let Some(n) = self.window_calls {
            if let Some(n) = u32_of(AttrOption::Window, n, errors) {
                breaker.window = SlidingWindow::Count(n);
            }
        }
        // A config file's `window` and the DSL's window size: `"60s"`, `"60s in 12 buckets"`
        // (or `"100 calls"`), checked there.
        if let Some(src) = self.window_time {
            match dsl::parse_window(src) {
                Ok(window) => breaker.window = window,
                Err(e) => errors.push(dsl_err(AttrOption::Window, src, &e)),
            }
        }
        breaker.min_calls = match self.min_calls {
            Some(n) => u32_of(AttrOption::MinCalls, n, errors).unwrap_or(1),
            None => defaults::default_min_calls(breaker.window),
        };
        if let Some(src) = self.cooldown {
            match dsl::parse_duration(src) {
                Ok(d) => {
                    breaker.cooldown = d;
                    breaker.cooldown_max = defaults::cooldown_max(d, breaker.cooldown_multiplier);
                }
                Err(e) => errors.push(dsl_err(AttrOption::Cooldown, src, &e)),
            }
        }
        if let Some(n) = self.half_open_probes {
            if let Some(n) = u32_of(AttrOption::HalfOpenProbes, n, errors) {
                breaker.half_open_probes = n;
            }
        }
        breaker
    }
}

/// An `order` problem in the attribute's words (its items are the list's elements).
fn order_message(problem: OrderError) -> String {
    match problem {
        OrderError::Twice { layer, .. } => format!(
            "layer `{layer}` is listed twice in `order`; each layer has exactly one position, \
             outermost first: remove one"
        ),
        OrderError::NotConfigured { layer, .. }
            if AttrOption::of_layer(layer) == AttrOption::Order =>
        {
            format!(
                "layer `{layer}` is in `order` but not configured; remove `{layer}` from `order`"
            )
        }
        OrderError::NotConfigured { layer, .. } => {
            let option = AttrOption::of_layer(layer);
            format!(
                "layer `{layer}` is in `order` but not configured; add `{option} = {}` or \
                 remove `{layer}` from `order`",
                option.example()
            )
        }
        // Gathered into one message by the caller.
        OrderError::Missing { layer } => format!("`order` leaves out `{layer}`"),
        other => other.to_string(),
    }
}

/// Any other validator error, at `option`.
fn field_message(e: FieldError, option: Option<AttrOption>) -> OptionError {
    let message = match (e.rule, option) {
        (Rule::Idempotent, _) if e.field == Field::Hedge => "`hedge` runs the function \
                                  more than once at a time, but `idempotent = false` says it \
                                  must run at most once; remove `hedge` or set \
                                  `idempotent = true`"
            .to_owned(),
        (Rule::Idempotent, _) => "`retry` runs the function again, but `idempotent = false` says \
                                  it must run at most once; remove `retry` or set \
                                  `idempotent = true`"
            .to_owned(),
        (_, Some(option)) => format!("invalid `{option}`: {}", e.message),
        (_, None) => format!("invalid `{}`: {}", e.field, e.message),
    };
    OptionError {
        option,
        item: None,
        message,
    }
}
