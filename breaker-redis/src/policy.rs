//! What the store needs of a shared breaker's policy: the parameters its writes carry.
//!
//! There is no fleet policy type: a shared breaker runs its own [`BreakerPolicy`], checked for
//! its scope by the core's one validator ([`Policy::validate`], whose fleet rules are
//! [`scope_errors`](breaker_core::policy::scope_errors): a time window of at most
//! [`MAX_SHARED_BUCKETS`] buckets for the rate rules). The store decides nothing with it; a
//! write carries only what the store's primitives apply:
//!
//! - the fleet window's length and buckets (the policy's time window), where counts are added;
//! - the probe cap (`half_open_probes`) and the lease (the probe wait: `max_probe_wait`, or the
//!   cooldown when unset; a lease's expiry is the fleet's takeover, as the probe wait is the
//!   local one);
//! - the quorum (the scope's `k`);
//! - a fingerprint of the policy, recorded with each transition so a replica whose policy
//!   differs from the one that made the last transition is told (`policy_mismatch`);
//! - an expiry for the keys (twice the longest of the window, the longest cooldown and the
//!   lease, at least 10 s; hygiene only: a replica that still knows the breaker seeds it again).

use crate::protocol::Params;
use breaker_core::breaker::{BreakerPolicy, SlidingWindow};
use breaker_core::policy::{Policy, ValidationError};
use breaker_core::scope::{Scope, MAX_SHARED_BUCKETS};
use std::time::Duration;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The parameters of a breaker of `policy` in `scope`, once the one validator accepts them.
///
/// # Errors
/// The [`ValidationError`] of [`Policy::validate`] for a breaker of `policy` in `scope`.
pub(crate) fn params(policy: &BreakerPolicy, scope: Scope) -> Result<Params, ValidationError> {
    Policy {
        breaker: Some(policy.clone()),
        scope,
        ..Policy::default()
    }
    .validate()?;
    let (window, buckets) = match policy.window {
        SlidingWindow::Time { length, buckets } => (length, buckets.clamp(1, MAX_SHARED_BUCKETS)),
        // No rate rule reads it (the validator refuses a count window with one): a nominal
        // window for the keys' expiry.
        SlidingWindow::Count(_) => (Duration::from_secs(10), 10),
    };
    let lease = policy.max_probe_wait.unwrap_or(policy.cooldown);
    let longest_cooldown = if policy.cooldown_multiplier > 1.0 {
        policy.cooldown_max.max(policy.cooldown)
    } else {
        policy.cooldown
    };
    let ttl = (window.max(longest_cooldown).max(lease) * 2).max(Duration::from_secs(10));
    Ok(Params {
        fingerprint: fingerprint(policy).into(),
        ttl_ms: ms(ttl),
        window_ms: ms(window),
        buckets,
        cap: policy.half_open_probes,
        lease_ms: ms(lease),
        quorum: scope.quorum().unwrap_or(1),
    })
}

/// 16 hex digits of the FNV-1a hash of the policy's `Debug` text: equal policies, equal
/// fingerprints (within one version of the crate).
pub(crate) fn fingerprint(policy: &BreakerPolicy) -> String {
    let text = format!("{policy:?}");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use breaker_core::policy::Field;

    #[test]
    fn a_time_window_policy_gives_its_window_cap_lease_and_quorum() {
        let p = BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            window: SlidingWindow::Time {
                length: Duration::from_secs(10),
                buckets: 10,
            },
            min_calls: 20,
            half_open_probes: 2,
            max_probe_wait: Some(Duration::from_secs(3)),
            ..BreakerPolicy::default()
        };
        let got = params(&p, Scope::Quorum(3)).unwrap();
        assert_eq!(
            (
                got.window_ms,
                got.buckets,
                got.cap,
                got.lease_ms,
                got.quorum
            ),
            (10_000, 10, 2, 3_000, 3)
        );
        assert_eq!(got.ttl_ms, 60_000, "twice the 30 s cooldown");
        assert_eq!(got.fingerprint.len(), 16);
        let other = BreakerPolicy {
            min_calls: 21,
            ..p.clone()
        };
        assert_ne!(fingerprint(&other), fingerprint(&p));
        // No probe wait: the lease is the cooldown.
        let p = BreakerPolicy::default();
        assert_eq!(params(&p, Scope::Shared).unwrap().lease_ms, 30_000);
    }

    /// A count window under a shared scope is refused by the one validator (it was silently
    /// mapped to a 10 s time window), and so are more buckets than the store keeps.
    #[test]
    fn the_one_validator_refuses_what_a_fleet_cannot_share() {
        let count = BreakerPolicy {
            failure_rate_percent: Some(50.0),
            window: SlidingWindow::Count(100),
            min_calls: 10,
            ..BreakerPolicy::default()
        };
        let e = params(&count, Scope::Shared).unwrap_err();
        assert_eq!(e.errors[0].field, Field::Window);
        assert_eq!(
            e.errors[0].message,
            "a count window (the last 100 calls) has no order across replicas, so scope `shared` \
             cannot share it: give the rate rules a time window (`window = \"10s\"`, DSL `50% of \
             10s`)"
        );
        // Without a rate rule the window is never read: accepted.
        assert!(params(&BreakerPolicy::default(), Scope::Shared).is_ok());
        let buckets = BreakerPolicy {
            window: SlidingWindow::Time {
                length: Duration::from_secs(60),
                buckets: 60,
            },
            ..count
        };
        let e = params(&buckets, Scope::Quorum(2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid policy: `window`: under scope `quorum(2)` a time window has at most 20 \
             buckets (the store keeps each breaker under 1 KiB), got 60"
        );
        // Every mistake at once: the breaker's own with the fleet's.
        let both = BreakerPolicy {
            half_open_probes: 0,
            ..buckets
        };
        let fields: Vec<_> = params(&both, Scope::Shared)
            .unwrap_err()
            .errors
            .iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, [Field::HalfOpenProbes, Field::Window]);
    }
}
