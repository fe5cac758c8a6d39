//! Sweeps: a grid of policies around a base, each point one config key set to one value,
//! ranked, with its Pareto front.
//!
//! # Keys and values
//! `KEY=VALUES`, where `KEY` is a config-file key path of a policy (`breaker.cooldown`,
//! `breaker.consecutive_failures`, `breaker.failure_rate`, `retry`, `timeout`, ...) and
//! `VALUES` is
//! - a list, `5s,10s,30s` (separated by `|` instead when a value contains commas, as a whole
//!   DSL string does: `breaker=3 consecutive, open 5s|5 consecutive, open 10s`);
//! - or a range, both ends included: integers `3..10` (step 1) or `1..9:2`; numbers or
//!   durations with a step, `0.5..2:0.5`, `5s..30s:5s`.
//!
//! Every point is built by the config loader, as if the base policy were a file's `default`
//! section and the point's keys a named policy overlaid on it: the values are parsed and
//! validated by the same code as config files, with the same rules (setting one trip rule,
//! such as `breaker.failure_rate`, replaces the base's trip rules; a DSL string replaces the
//! value whole).
//!
//! # Ranking
//! Points are ranked by `failures_reached + successes_refused` (the failed attempts the
//! policy let through plus the calls that would have succeeded and that any of its local
//! layers refused, weighted equally), then by `failures_reached`, then in grid order. The
//! **Pareto front** is the set of points that no other point beats on both `failures_reached`
//! and `successes_refused` (at least as good on both, better on one).
//!
//! The cost side is `successes_refused`, not the breaker's own `successes_rejected`: a good
//! call refused by a rate limit, an adaptive limit, a throttle or a bulkhead costs the same
//! availability as one the breaker refused, so ranking by the breaker's share alone would put
//! a policy that sheds most healthy traffic first (a `rate = "10/s burst 1"` refusing 428 of
//! 513 good calls would cost nothing).

use crate::replay::NamedPolicy;
use crate::report::Report;
use breaker_core::breaker::{BreakerPolicy, SlidingWindow};
use breaker_core::config::{
    BreakerTable, BulkheadTable, ConfigFile, Dsl, Format, Loader, Percent, RetryTable, Section,
    Spec,
};
use breaker_core::dsl::{format_duration, parse_duration};
use breaker_core::policy::Policy;
use std::collections::BTreeMap;

/// The most points a sweep may have.
pub const MAX_POINTS: usize = 100_000;

/// One swept key and its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The config key path, such as `breaker.cooldown`.
    pub key: String,
    /// The values, as written in a config file (numbers unquoted).
    pub values: Vec<String>,
}

impl std::str::FromStr for Axis {
    type Err = String;

    /// Parses `KEY=VALUES`; see the [module docs](self).
    fn from_str(s: &str) -> Result<Axis, String> {
        let (key, values) = s.split_once('=').ok_or_else(|| {
            format!("`{s}`: expected `KEY=VALUES`, such as `breaker.cooldown=5s,10s,30s`")
        })?;
        let key = key.trim();
        if key.is_empty()
            || !key
                .split('.')
                .all(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        {
            return Err(format!(
                "`{key}`: expected a config key path such as `breaker.cooldown` (lowercase \
                 keys separated by `.`)"
            ));
        }
        if key == "breaker" && values.contains(',') && !values.contains('|') {
            // A breaker's DSL separates its clauses with commas: a list of them needs `|`.
            return Err(format!(
                "`{key}={}`: a breaker's DSL has commas, so separate whole breakers with `|`, \
                 such as `breaker=5 consecutive, open 1s|3 consecutive, open 2s`",
                values.trim()
            ));
        }
        let values = expand(values.trim()).map_err(|e| format!("`{key}={values}`: {e}"))?;
        Ok(Axis {
            key: key.to_owned(),
            values,
        })
    }
}

fn expand(values: &str) -> Result<Vec<String>, String> {
    if values.is_empty() {
        return Err("no values".into());
    }
    if let Some((from, rest)) = values.split_once("..") {
        if !values.contains(',') && !values.contains('|') {
            let rest = rest.strip_prefix('=').unwrap_or(rest);
            let (to, step) = match rest.split_once(':') {
                Some((to, step)) => (to, Some(step)),
                None => (rest, None),
            };
            return range(from.trim(), to.trim(), step.map(str::trim));
        }
    }
    let sep = if values.contains('|') { '|' } else { ',' };
    let list: Vec<String> = values.split(sep).map(|v| v.trim().to_owned()).collect();
    if let Some(empty) = list.iter().position(String::is_empty) {
        return Err(format!("value {} of the list is empty", empty + 1));
    }
    Ok(list)
}

fn range(from: &str, to: &str, step: Option<&str>) -> Result<Vec<String>, String> {
    let too_many = || format!("the range has more than {MAX_POINTS} values");
    let int_step = step.map_or(Some(1), |s| s.parse::<i64>().ok());
    if let (Ok(a), Ok(b), Some(step)) = (from.parse::<i64>(), to.parse::<i64>(), int_step) {
        if step <= 0 {
            return Err(format!("step `{step}`: expected a positive step"));
        }
        if b < a {
            return Err(format!("`{from}..{to}`: the end is below the start"));
        }
        if (b - a) / step >= MAX_POINTS as i64 {
            return Err(too_many());
        }
        return Ok((a..=b)
            .step_by(step as usize)
            .map(|v| v.to_string())
            .collect());
    }
    if let (Ok(a), Ok(b)) = (parse_duration(from), parse_duration(to)) {
        let step = step.ok_or("a range of durations needs a step, such as `5s..30s:5s`")?;
        let step = parse_duration(step).map_err(|e| format!("step `{step}`: {e}"))?;
        if step.is_zero() || b < a {
            return Err("expected a step above 0s and an end not below the start".into());
        }
        let n = ((b - a).as_nanos() / step.as_nanos()) as usize;
        if n >= MAX_POINTS {
            return Err(too_many());
        }
        return Ok((0..=n as u32)
            .map(|i| format_duration(a + step * i))
            .collect());
    }
    if let (Ok(a), Ok(b)) = (from.parse::<f64>(), to.parse::<f64>()) {
        let step = step.ok_or("a range of numbers needs a step, such as `0.5..2:0.5`")?;
        let s = step
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| format!("step `{step}`: expected a positive number"))?;
        if !(a.is_finite() && b.is_finite() && b >= a) {
            return Err(format!(
                "`{from}..{to}`: expected finite ends, the end not below the start"
            ));
        }
        let n = ((b - a) / s + 1e-9).floor() as usize;
        if n >= MAX_POINTS {
            return Err(too_many());
        }
        // Rounded to 9 decimals: 0.1 + 0.2 is shown as 0.3.
        return Ok((0..=n)
            .map(|i| {
                let v = a + s * i as f64;
                format!("{}", (v * 1e9).round() / 1e9)
            })
            .collect());
    }
    Err(format!(
        "`{from}..{to}`: expected a range of integers (`3..10`), numbers (`0.5..2:0.5`) or \
         durations (`5s..30s:5s`)"
    ))
}

/// The base policy as a config section with every value written out as a table, so a
/// sweep's keys overlay it field by field.
fn section(policy: &Policy) -> Section {
    Section {
        breaker: policy
            .breaker
            .as_ref()
            .map(|b| Spec::Table(breaker_table(b))),
        retry: policy.retry.map(|r| {
            Spec::Table(RetryTable {
                max_attempts: Some(r.max_attempts),
                backoff: Some(Dsl(r.backoff)),
                jitter: Some(Dsl(r.jitter)),
            })
        }),
        timeout: policy.timeout.map(Dsl),
        deadline: policy.deadline.map(Dsl),
        bulkhead: policy.bulkhead.map(|b| {
            Spec::Table(BulkheadTable {
                max_concurrent: Some(b.max_concurrent),
                max_wait: Some(Dsl(b.max_wait)),
            })
        }),
        rate: policy.rate_limit.map(Dsl),
        hedge: policy.hedge.map(Dsl),
        adaptive: policy.adaptive.map(Dsl),
        throttle: policy.throttle.map(Dsl),
        order: policy.order.clone().map(Dsl),
        idempotent: Some(policy.idempotent),
        ..Section::default()
    }
}

fn breaker_table(b: &BreakerPolicy) -> BreakerTable {
    BreakerTable {
        consecutive_failures: b.consecutive_failures,
        failure_rate: b.failure_rate_percent.map(Percent),
        slow_call_duration: b.slow_call.map(|s| Dsl(s.duration)),
        slow_call_rate: b.slow_call.map(|s| Percent(s.rate_percent)),
        window: Some(Dsl(b.window)),
        min_calls: Some(b.min_calls).filter(|_| {
            b.failure_rate_percent.is_some()
                || b.slow_call.is_some()
                || matches!(b.window, SlidingWindow::Count(_))
        }),
        cooldown: Some(Dsl(b.cooldown)),
        cooldown_multiplier: Some(b.cooldown_multiplier),
        cooldown_max: (b.cooldown_multiplier != 1.0).then_some(Dsl(b.cooldown_max)),
        cooldown_jitter: Some(b.cooldown_jitter),
        half_open_probes: Some(b.half_open_probes),
        successes_to_close: Some(b.successes_to_close),
        max_probe_wait: b.max_probe_wait.map(Dsl),
        neutral_probe: Some(Dsl(b.neutral_probe)),
    }
}

/// The grid of `axes` over `base`: one policy per combination, the first axis varying
/// slowest, named `BASE KEY=VALUE ...`.
///
/// # Errors
/// A key swept twice, a grid of more than [`MAX_POINTS`] points, or a point the config loader refuses (an
/// unknown key, a bad value, an invalid policy), with the key and value named.
pub fn grid(base: &NamedPolicy, axes: &[Axis]) -> Result<Vec<NamedPolicy>, String> {
    if let Some((_, a)) = axes
        .iter()
        .enumerate()
        .find(|(i, a)| axes[..*i].iter().any(|b| b.key == a.key))
    {
        return Err(format!(
            "`{}` is swept twice; give all its values in one axis, such as `{}=A,B`",
            a.key, a.key
        ));
    }
    let size = axes
        .iter()
        .try_fold(1usize, |n, a| n.checked_mul(a.values.len()))
        .filter(|n| *n <= MAX_POINTS)
        .ok_or_else(|| format!("the sweep has more than {MAX_POINTS} points"))?;
    let file = ConfigFile {
        schema: None,
        default: Some(section(&base.policy)),
        policies: BTreeMap::from([("sweep".to_owned(), Section::default())]),
        store: None,
    };
    let json = serde_json::to_string(&file).expect("a config serializes");
    let mut points = Vec::with_capacity(size);
    for i in 0..size {
        let mut rest = i;
        let mut chosen = vec![(String::new(), String::new()); axes.len()];
        for (k, axis) in axes.iter().enumerate().rev() {
            let n = axis.values.len();
            chosen[k] = (axis.key.clone(), axis.values[rest % n].clone());
            rest /= n;
        }
        let vars: Vec<(String, String)> = chosen
            .iter()
            .map(|(k, v)| {
                let path: Vec<String> = k.split('.').map(str::to_ascii_uppercase).collect();
                (
                    format!("BREAKER__POLICIES__SWEEP__{}", path.join("__")),
                    v.clone(),
                )
            })
            .collect();
        let described = chosen
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let policies = Loader::text(json.clone(), Format::Json)
            .env_vars(vars)
            .load()
            .map_err(|errors| {
                let text: Vec<String> = errors
                    .errors()
                    .iter()
                    .map(|e| {
                        let path = e
                            .key_path
                            .strip_prefix("policies.sweep.")
                            .unwrap_or(&e.key_path);
                        // The loader's advice is for a file; a sweep can set it too.
                        let message = e.message.replace(
                            "add `idempotent = true`",
                            "add `idempotent = true` to the base policy or \
                             `--sweep idempotent=true`",
                        );
                        format!("{path}: {message}")
                    })
                    .collect();
                format!("sweep point `{described}`: {}", text.join("; "))
            })?;
        let policy = policies.get("sweep").expect("the sweep policy is loaded");
        points.push(NamedPolicy {
            name: format!("{} {described}", base.name),
            policy: (*policy).clone(),
            params: chosen,
        });
    }
    Ok(points)
}

/// Ranks `reports` (see the [module docs](self)): sets `rank` and `pareto` on each, and sorts
/// them by rank.
pub fn rank(reports: &mut Vec<Report>) {
    let n = reports.len();
    let key = |r: &Report| (r.failures_reached, r.successes_refused);
    // The Pareto front: sorted by (failures, refused), a point is beaten iff an earlier one
    // with fewer failures refused no more, or one with as many failures refused fewer.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| key(&reports[i]));
    let mut best_below = u64::MAX; // fewest refused among points with fewer failures
    let mut i = 0;
    while i < n {
        let f = reports[order[i]].failures_reached;
        let mut j = i;
        while j < n && reports[order[j]].failures_reached == f {
            j += 1;
        }
        let group_min = reports[order[i]].successes_refused;
        for &k in &order[i..j] {
            let s = reports[k].successes_refused;
            reports[k].pareto = Some(s == group_min && s < best_below);
        }
        best_below = best_below.min(group_min);
        i = j;
    }
    let mut indexed: Vec<(usize, Report)> = reports.drain(..).enumerate().collect();
    indexed.sort_by_key(|(i, r)| {
        (
            r.failures_reached + r.successes_refused,
            r.failures_reached,
            *i,
        )
    });
    for (rank, (_, mut r)) in indexed.into_iter().enumerate() {
        r.rank = Some(rank as u32 + 1);
        reports.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn values_expand_lists_and_inclusive_ranges() {
        let axis = |s: &str| s.parse::<Axis>().map(|a| a.values);
        assert_eq!(
            axis("breaker.consecutive_failures=3..6").unwrap(),
            ["3", "4", "5", "6"]
        );
        assert_eq!(
            axis("breaker.consecutive_failures=1..=7:3").unwrap(),
            ["1", "4", "7"]
        );
        assert_eq!(
            axis("breaker.cooldown=5s,10s, 30s").unwrap(),
            ["5s", "10s", "30s"]
        );
        assert_eq!(
            axis("breaker.cooldown=1s..3s:1s").unwrap(),
            ["1s", "2s", "3s"]
        );
        assert_eq!(
            axis("breaker.cooldown_multiplier=1..2:0.5").unwrap(),
            ["1", "1.5", "2"]
        );
        assert_eq!(
            axis("breaker=3 consecutive, open 5s|5 consecutive").unwrap(),
            ["3 consecutive, open 5s", "5 consecutive"]
        );
        assert_eq!(
            axis("breaker.cooldown=5s..30s").unwrap_err(),
            "`breaker.cooldown=5s..30s`: a range of durations needs a step, such as `5s..30s:5s`"
        );
        assert!(axis("Breaker.Cooldown=1s")
            .unwrap_err()
            .contains("config key path"));
        assert!(axis("cooldown")
            .unwrap_err()
            .contains("expected `KEY=VALUES`"));
    }

    fn base() -> NamedPolicy {
        NamedPolicy::from_breaker_dsl("5 consecutive, open 30s").unwrap()
    }

    /// A sweep point is the base policy with the swept keys changed: the base's rate limit,
    /// hedging, adaptive limit and throttling are kept, and can be swept too.
    #[test]
    fn a_grid_keeps_every_layer_of_the_base() {
        let mut base = base();
        base.policy.rate_limit = Some("100/s burst 20 per key".parse().unwrap());
        base.policy.hedge = Some("1x after 50ms".parse().unwrap());
        base.policy.adaptive = Some("aimd 5..200".parse().unwrap());
        base.policy.throttle = Some("k 2".parse().unwrap());
        base.policy.idempotent = true;
        let points = grid(&base, &["breaker.cooldown=5s,10s".parse().unwrap()]).unwrap();
        for p in &points {
            assert_eq!(p.policy.rate_limit, base.policy.rate_limit, "{}", p.name);
            assert_eq!(p.policy.hedge, base.policy.hedge, "{}", p.name);
            assert_eq!(p.policy.adaptive, base.policy.adaptive, "{}", p.name);
            assert_eq!(p.policy.throttle, base.policy.throttle, "{}", p.name);
        }
        let rates = grid(&base, &["rate=10/s,20/s burst 1".parse().unwrap()]).unwrap();
        let got: Vec<_> = rates
            .iter()
            .map(|p| p.policy.rate_limit.unwrap().to_string())
            .collect();
        assert_eq!(got, ["10/s burst 10", "20/s burst 1"]);
        // A base that is not idempotent: the advice says how to sweep it idempotent.
        let e = grid(
            &super::tests::base(),
            &["hedge=1x after 50ms".parse().unwrap()],
        )
        .unwrap_err();
        assert_eq!(
            e,
            "sweep point `hedge=1x after 50ms`: hedge: hedging sends a call more than once, but \
             only operations declared idempotent are hedged and this policy is not; add \
             `idempotent = true` to the base policy or `--sweep idempotent=true`, or remove the \
             hedge"
        );
        // A layer written as one string has no keys to sweep inside it.
        let e = grid(&base, &["rate.burst=1".parse().unwrap()]).unwrap_err();
        assert!(
            e.starts_with(
                "sweep point `rate.burst=1`: rate: a table, but this key is one string with no \
                 keys of its own (write the whole value, not a key inside it)"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_grid_goes_through_the_config_loader() {
        let axes = [
            "breaker.consecutive_failures=3..4".parse().unwrap(),
            "breaker.cooldown=5s,10s".parse().unwrap(),
        ];
        let points = grid(&base(), &axes).unwrap();
        let got: Vec<(String, Option<u32>, Duration)> = points
            .iter()
            .map(|p| {
                let b = p.policy.breaker.as_ref().unwrap();
                (p.name.clone(), b.consecutive_failures, b.cooldown)
            })
            .collect();
        let s = Duration::from_secs;
        assert_eq!(
            got,
            [
                (
                    "5 consecutive, open 30s breaker.consecutive_failures=3 breaker.cooldown=5s"
                        .into(),
                    Some(3),
                    s(5)
                ),
                (
                    "5 consecutive, open 30s breaker.consecutive_failures=3 breaker.cooldown=10s"
                        .into(),
                    Some(3),
                    s(10)
                ),
                (
                    "5 consecutive, open 30s breaker.consecutive_failures=4 breaker.cooldown=5s"
                        .into(),
                    Some(4),
                    s(5)
                ),
                (
                    "5 consecutive, open 30s breaker.consecutive_failures=4 breaker.cooldown=10s"
                        .into(),
                    Some(4),
                    s(10)
                ),
            ]
        );
        // A trip rule replaces the base's trip rules, as in a config file.
        let rate = grid(&base(), &["breaker.failure_rate=50".parse().unwrap()]).unwrap();
        let b = rate[0].policy.breaker.as_ref().unwrap();
        assert_eq!(
            (b.consecutive_failures, b.failure_rate_percent),
            (None, Some(50.0))
        );
        // Errors name the point and the key.
        let e = grid(&base(), &["breaker.cooldown=0s".parse().unwrap()]).unwrap_err();
        assert!(
            e.starts_with("sweep point `breaker.cooldown=0s`: breaker.cooldown: must be non-zero"),
            "{e}"
        );
        let e = grid(&base(), &["breaker.cooldwn=1s".parse().unwrap()]).unwrap_err();
        assert!(e.contains("cooldwn"), "{e}");
        // A key swept twice would have its second axis win silently: refused.
        let twice = [
            "breaker.cooldown=1s".parse().unwrap(),
            "breaker.cooldown=2s".parse().unwrap(),
        ];
        assert_eq!(
            grid(&base(), &twice).unwrap_err(),
            "`breaker.cooldown` is swept twice; give all its values in one axis, such as \
             `breaker.cooldown=A,B`"
        );
        // Whole breakers have commas in them: a list of them is separated by `|`.
        assert_eq!(
            "breaker=5 consecutive, open 1s"
                .parse::<Axis>()
                .unwrap_err(),
            "`breaker=5 consecutive, open 1s`: a breaker's DSL has commas, so separate whole \
             breakers with `|`, such as `breaker=5 consecutive, open 1s|3 consecutive, open 2s`"
        );
        let two: Axis = "breaker=5 consecutive, open 1s|3 consecutive, open 2s"
            .parse()
            .unwrap();
        assert_eq!(
            two.values,
            ["5 consecutive, open 1s", "3 consecutive, open 2s"]
        );
    }

    fn report(f: u64, s: u64) -> Report {
        let mut r = crate::report::Report::new(
            format!("{f}/{s}"),
            Vec::new(),
            crate::report::Counts::default(),
            None,
            None,
            None,
        );
        r.failures_reached = f;
        r.successes_refused = s;
        r
    }

    #[test]
    fn ranking_and_pareto_front() {
        let mut reports = vec![
            report(10, 0),
            report(5, 5),
            report(6, 5),
            report(0, 12),
            report(5, 5),
            report(3, 9),
            report(4, 9),
        ];
        rank(&mut reports);
        let got: Vec<(String, u32, bool)> = reports
            .iter()
            .map(|r| (r.policy.clone(), r.rank.unwrap(), r.pareto.unwrap()))
            .collect();
        let want = [
            ("5/5", 1, true),
            ("5/5", 2, true),
            ("10/0", 3, true),
            ("6/5", 4, false),
            ("0/12", 5, true),
            ("3/9", 6, true),
            ("4/9", 7, false),
        ];
        let want: Vec<(String, u32, bool)> = want
            .iter()
            .map(|(n, r, p)| ((*n).to_owned(), *r, *p))
            .collect();
        assert_eq!(got, want);
    }
}
