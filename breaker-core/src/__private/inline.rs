//! The policy written in the attribute's options: built at compile time to report invalid
//! values, and again at run time from the same literals.

use crate::breaker::{BreakerPolicy, FieldError, SlidingWindow};
use crate::dsl::{self, DslError};
use crate::layer::Layer;
use crate::policy::{BulkheadPolicy, Policy};
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
    /// `window = "D"`.
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
    /// `order = [..]`, the layer names as written.
    pub order: Option<&'a [&'a str]>,
}

/// One invalid option value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The attribute option (`threshold`, `cooldown`, `order`, ...).
    pub option: &'static str,
    /// For `order`: the index of the offending item, if the error is about one item.
    pub item: Option<usize>,
    /// What is wrong and what is accepted, lowercase.
    pub message: String,
}

fn err(option: &'static str, message: impl Into<String>) -> OptionError {
    OptionError {
        option,
        item: None,
        message: message.into(),
    }
}

fn dsl_err(option: &'static str, src: &str, e: &DslError) -> OptionError {
    err(
        option,
        format!("invalid {option} `{src}`: {}", e.describe()),
    )
}

fn u32_of(option: &'static str, n: u64, errors: &mut Vec<OptionError>) -> Option<u32> {
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

/// The attribute option that sets a policy field, for the errors of
/// [`Policy::validate`](crate::policy::Policy::validate).
fn option_of_field(field: &str) -> &'static str {
    match field {
        "consecutive_failures" => "threshold",
        "failure_rate" => "failure_rate",
        "window" => "window",
        "min_calls" => "min_calls",
        "cooldown" | "cooldown_max" => "cooldown",
        "half_open_probes" => "half_open_probes",
        "max_attempts" | "backoff" | "jitter" => "retry",
        "timeout" => "timeout",
        "deadline" => "deadline",
        "max_concurrent" | "max_wait" => "concurrency",
        "order" => "order",
        _ => "threshold",
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
        order: None,
    };

    /// Builds and validates the whole policy, returning every error at once.
    ///
    /// Defaults: the breaker trips after 5 consecutive failures unless `failure_rate` is given
    /// (then it trips on the rate alone), stays open 30 s, admits 1 probe. Writing `retry` is
    /// itself the opt-in to re-running the function, so it implies `idempotent = true`;
    /// `idempotent = false` together with `retry` is an error (case BR-35). Without `order`,
    /// the configured layers nest in [`Layer::DEFAULT_ORDER`].
    ///
    /// # Errors
    /// Every invalid value, each with the option that set it.
    pub fn build(&self) -> Result<Policy, Vec<OptionError>> {
        let mut errors = Vec::new();
        let mut breaker = BreakerPolicy::default();
        if let Some(n) = self.threshold {
            breaker.consecutive_failures = u32_of("threshold", n, &mut errors);
        } else if self.failure_rate.is_some() {
            breaker.consecutive_failures = None;
        }
        if let Some(p) = self.failure_rate {
            breaker.failure_rate_percent = Some(p);
        }
        let has_rate = self.failure_rate.is_some();
        if !has_rate {
            if self.window_calls.is_some() || self.window_time.is_some() {
                errors.push(err(
                    "window",
                    "`window` has no effect without `failure_rate`; add `failure_rate` or \
                     remove `window`",
                ));
            }
            if self.min_calls.is_some() {
                errors.push(err(
                    "min_calls",
                    "`min_calls` has no effect without `failure_rate`; add `failure_rate` or \
                     remove `min_calls`",
                ));
            }
        }
        if let Some(n) = self.window_calls {
            if let Some(n) = u32_of("window", n, &mut errors) {
                breaker.window = SlidingWindow::Count(n);
            }
        }
        if let Some(src) = self.window_time {
            match dsl::parse_duration(src) {
                Ok(length) => {
                    breaker.window = SlidingWindow::Time {
                        length,
                        buckets: SlidingWindow::DEFAULT_BUCKETS,
                    }
                }
                Err(e) => errors.push(dsl_err("window", src, &e)),
            }
        }
        breaker.min_calls = match self.min_calls {
            Some(n) => u32_of("min_calls", n, &mut errors).unwrap_or(1),
            None => dsl::default_min_calls(breaker.window),
        };
        if let Some(src) = self.cooldown {
            match dsl::parse_duration(src) {
                Ok(d) => {
                    breaker.cooldown = d;
                    breaker.cooldown_max = d;
                }
                Err(e) => errors.push(dsl_err("cooldown", src, &e)),
            }
        }
        if let Some(n) = self.half_open_probes {
            if let Some(n) = u32_of("half_open_probes", n, &mut errors) {
                breaker.half_open_probes = n;
            }
        }
        let retry = self.retry.and_then(|src| match dsl::parse_retry(src) {
            Ok(r) => Some(r),
            Err(e) => {
                errors.push(dsl_err("retry", src, &e));
                None
            }
        });
        let idempotent = match (self.idempotent, self.retry) {
            (Some(false), Some(_)) => {
                errors.push(err(
                    "idempotent",
                    "`retry` runs the function again, but `idempotent = false` says it must run \
                     at most once (case BR-35); remove `retry` or set `idempotent = true`",
                ));
                // Said once, here: the policy's own check of the same rule must not repeat it.
                true
            }
            (Some(flag), _) => flag,
            (None, retry) => retry.is_some(),
        };
        let mut duration = |option: &'static str, src: Option<&str>| {
            src.and_then(|src| match dsl::parse_duration(src) {
                Ok(d) => Some(d),
                Err(e) => {
                    errors.push(dsl_err(option, src, &e));
                    None
                }
            })
        };
        let timeout = duration("timeout", self.timeout);
        let deadline = duration("deadline", self.deadline);
        let bulkhead = self.concurrency.map(|n| BulkheadPolicy {
            max_concurrent: u32::try_from(n).unwrap_or(u32::MAX),
            max_wait: Duration::ZERO,
        });
        let mut policy = Policy {
            breaker: Some(breaker),
            retry,
            timeout,
            deadline,
            bulkhead,
            order: None,
            idempotent,
        };
        if let Some(names) = self.order {
            policy.order = Some(self.check_order(names, &mut errors));
        }
        // Field errors only for options whose own value parsed: a value that did not parse
        // already has its error, and the default left in its place must not add another.
        if let Err(e) = policy.validate() {
            for FieldError { field, message } in e.errors {
                let option = option_of_field(field);
                if option == "order" || errors.iter().any(|e| e.option == option) {
                    continue;
                }
                let shown = if option == "threshold" && field != "consecutive_failures" {
                    field
                } else {
                    option
                };
                errors.push(err(option, format!("invalid `{shown}`: {message}")));
            }
        }
        if errors.is_empty() {
            policy.order = Some(policy.effective_order());
            Ok(policy)
        } else {
            Err(errors)
        }
    }

    /// Checks `order` item by item (so each error can point at its item): known names, no
    /// duplicates, only configured layers, and every configured layer placed.
    fn check_order(&self, names: &[&str], errors: &mut Vec<OptionError>) -> Vec<Layer> {
        // Configured means "given": a retry spec that did not parse has its own error.
        let configured: Vec<Layer> = Layer::DEFAULT_ORDER
            .into_iter()
            .filter(|l| match l {
                Layer::Breaker => true,
                Layer::Retry => self.retry.is_some(),
                Layer::Timeout => self.timeout.is_some(),
                Layer::Bulkhead => self.concurrency.is_some(),
            })
            .collect();
        let mut layers = Vec::new();
        let mut items_ok = true;
        for (i, name) in names.iter().enumerate() {
            let mut item_err = |message: String| {
                errors.push(OptionError {
                    option: "order",
                    item: Some(i),
                    message,
                })
            };
            let Some(layer) = Layer::from_name(name) else {
                item_err(format!(
                    "unknown layer `{name}` in `order`; expected one of `bulkhead`, `retry`, \
                     `breaker`, `timeout`"
                ));
                items_ok = false;
                continue;
            };
            if layers.contains(&layer) {
                item_err(format!(
                    "layer `{name}` is listed twice in `order` (case BR-43); each layer has \
                     exactly one position, outermost first: remove one"
                ));
                items_ok = false;
                continue;
            }
            if !configured.contains(&layer) {
                let (option, example) = match layer {
                    Layer::Retry => ("retry", "\"3x exp\""),
                    Layer::Timeout => ("timeout", "\"2s\""),
                    Layer::Bulkhead => ("concurrency", "10"),
                    Layer::Breaker => ("threshold", "5"),
                };
                item_err(format!(
                    "layer `{name}` is in `order` but not configured (case BR-43); add \
                     `{option} = {example}` or remove `{name}` from `order`"
                ));
                items_ok = false;
                continue;
            }
            layers.push(layer);
        }
        if items_ok {
            let missing: Vec<String> = configured
                .iter()
                .filter(|l| !layers.contains(l))
                .map(|l| format!("`{l}`"))
                .collect();
            if !missing.is_empty() {
                errors.push(err(
                    "order",
                    format!(
                        "`order` must place every configured layer, outermost first; it leaves \
                         out {}",
                        missing.join(", ")
                    ),
                ));
            }
        }
        layers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_build() {
        let p = InlinePolicy::default().build().unwrap();
        assert_eq!(p.order, Some(vec![Layer::Breaker]));
        assert!(!p.idempotent);
    }

    #[test]
    fn every_error_at_once() {
        let errors = InlinePolicy {
            threshold: Some(0),
            cooldown: Some("30 parsecs"),
            retry: Some("3x expo"),
            order: Some(&["retry", "retry", "bogus"]),
            ..InlinePolicy::default()
        }
        .build()
        .unwrap_err();
        let options: Vec<_> = errors.iter().map(|e| (e.option, e.item)).collect();
        assert_eq!(
            options,
            [
                ("cooldown", None),
                ("retry", None),
                ("order", Some(1)),
                ("order", Some(2)),
                ("threshold", None),
            ]
        );
    }
}
