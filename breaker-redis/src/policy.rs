//! The policy of a shared breaker, as the store sees it.
//!
//! The server-side scripts decide fleet-wide transitions (the fleet failure rate, cooldowns,
//! the probe cap, quorum), so they need the policy's numbers. The first replica to write a
//! breaker *pins* its policy in the state hash together with a fingerprint; every replica sends
//! its own fingerprint with each write and is told when it differs (`policy_mismatch`), while
//! the pinned policy keeps governing the fleet's decisions. [`force`](crate::Store::force) and
//! [`reset`](crate::Store::reset) re-pin the caller's policy (an operator's deliberate act).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Most buckets of a fleet window (so a breaker's window stays a few hundred bytes in Redis).
pub const MAX_BUCKETS: u32 = 20;
/// Most half-open probes in flight across the fleet.
pub const MAX_PROBES: u32 = 65_535;

/// The fleet-wide rules of one shared breaker. See the [module docs](self).
///
/// Rate rules are evaluated by the store on the fleet's aggregated counts, over a time window
/// of `window` in `buckets` buckets, once it holds at least `min_calls` calls. Trips decided
/// locally by a replica (for example its consecutive-failure rule) are sent as trips; with
/// `quorum` above 1 they are votes, and the fleet opens when `quorum` distinct replicas voted
/// within `window`.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedPolicy {
    /// Trip when the fleet's failures are at least this percentage of its calls; `None`: no
    /// fleet rate rule. Range `(0, 100]`.
    pub failure_rate_percent: Option<f64>,
    /// Trip when the fleet's slow calls are at least this percentage; `None`: off.
    /// Range `(0, 100]`.
    pub slow_call_rate_percent: Option<f64>,
    /// Rate rules wait for this many calls in the fleet window. Range `1..=u32::MAX`.
    pub min_calls: u32,
    /// Length of the fleet window. Range 1 ms ..= 1 day, and at least 1 ms per bucket.
    pub window: Duration,
    /// Buckets of the fleet window. Range `1..=MAX_BUCKETS`.
    pub buckets: u32,
    /// How long the fleet stays open. Range 1 ms ..= 1 day.
    pub cooldown: Duration,
    /// Growth of the cooldown per consecutive opening. Range `1.0..=1000.0`.
    pub cooldown_multiplier: f64,
    /// Bound of the grown cooldown; at least `cooldown`, at most 1 day.
    pub cooldown_max: Duration,
    /// Jitter as a fraction of the cooldown, drawn by the replica whose write opens the
    /// breaker: the cooldown is drawn from `[d * (1 - jitter), d]`. Range `0.0..=1.0`.
    pub cooldown_jitter: f64,
    /// Most probes in flight across the fleet in half-open. Range `1..=MAX_PROBES`.
    pub half_open_probes: u32,
    /// Successful probes that close the fleet's breaker. Range `1..=8_191`.
    pub successes_to_close: u32,
    /// Distinct replicas whose local trips within `window` open the fleet: 1 for the `shared`
    /// scope (any replica's trip opens the fleet), `k` for `quorum(k)`. Range `1..=1000`.
    pub quorum: u32,
    /// How long a probe lease lives before its slot is free again: the probe's attempt
    /// timeout plus a margin. Range 1 ms ..= 1 day.
    pub probe_lease: Duration,
}

impl Default for SharedPolicy {
    /// A fleet rate rule of 50 % over 10 s (10 buckets) after 20 calls, a 30 s constant
    /// cooldown, one probe with a 10 s lease, closed after one success, `shared` scope.
    fn default() -> Self {
        SharedPolicy {
            failure_rate_percent: Some(50.0),
            slow_call_rate_percent: None,
            min_calls: 20,
            window: Duration::from_secs(10),
            buckets: 10,
            cooldown: Duration::from_secs(30),
            cooldown_multiplier: 1.0,
            cooldown_max: Duration::from_secs(30),
            cooldown_jitter: 0.0,
            half_open_probes: 1,
            successes_to_close: 1,
            quorum: 1,
            probe_lease: Duration::from_secs(10),
        }
    }
}

/// An invalid field of a [`SharedPolicy`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid shared policy: `{field}`: {message}")]
pub struct PolicyError {
    /// The field's name.
    pub field: &'static str,
    /// What is wrong and what is expected.
    pub message: String,
}

const DAY: Duration = Duration::from_secs(86_400);
const MS: Duration = Duration::from_millis(1);

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SharedPolicy {
    /// Checks every field.
    ///
    /// # Errors
    /// The first invalid field, with its valid range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let err = |field, message: String| Err(PolicyError { field, message });
        for (field, p) in [
            ("failure_rate_percent", self.failure_rate_percent),
            ("slow_call_rate_percent", self.slow_call_rate_percent),
        ] {
            if let Some(p) = p {
                if !(p > 0.0 && p <= 100.0) {
                    return err(field, format!("must be in (0, 100], got {p}"));
                }
            }
        }
        if self.min_calls == 0 {
            return err("min_calls", "must be at least 1, got 0".into());
        }
        if !(1..=MAX_BUCKETS).contains(&self.buckets) {
            return err(
                "buckets",
                format!("must be in 1..={MAX_BUCKETS}, got {}", self.buckets),
            );
        }
        for (field, d) in [
            ("window", self.window),
            ("cooldown", self.cooldown),
            ("cooldown_max", self.cooldown_max),
            ("probe_lease", self.probe_lease),
        ] {
            if d < MS || d > DAY {
                return err(field, format!("must be in 1ms..=1day, got {d:?}"));
            }
        }
        if ms(self.window) / u64::from(self.buckets) == 0 {
            return err(
                "window",
                format!(
                    "must be at least 1ms per bucket, got {:?} for {} buckets",
                    self.window, self.buckets
                ),
            );
        }
        if !(1.0..=1000.0).contains(&self.cooldown_multiplier) {
            return err(
                "cooldown_multiplier",
                format!("must be in 1.0..=1000.0, got {}", self.cooldown_multiplier),
            );
        }
        if self.cooldown_max < self.cooldown {
            return err(
                "cooldown_max",
                format!(
                    "must be at least `cooldown` ({:?}), got {:?}",
                    self.cooldown, self.cooldown_max
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.cooldown_jitter) {
            return err(
                "cooldown_jitter",
                format!("must be in 0.0..=1.0, got {}", self.cooldown_jitter),
            );
        }
        if !(1..=MAX_PROBES).contains(&self.half_open_probes) {
            return err(
                "half_open_probes",
                format!("must be in 1..={MAX_PROBES}, got {}", self.half_open_probes),
            );
        }
        if !(1..=8_191).contains(&self.successes_to_close) {
            return err(
                "successes_to_close",
                format!("must be in 1..=8191, got {}", self.successes_to_close),
            );
        }
        if !(1..=1000).contains(&self.quorum) {
            return err(
                "quorum",
                format!("must be in 1..=1000, got {}", self.quorum),
            );
        }
        Ok(())
    }

    /// How long the store keeps a breaker's keys after their last write: twice the longest of
    /// the window, the longest cooldown and the lease, at least 10 s. Hygiene only: a replica
    /// that still knows the breaker repairs it on its next write.
    pub fn key_ttl(&self) -> Duration {
        let longest = self
            .window
            .max(self.cooldown_max.max(self.cooldown))
            .max(self.probe_lease);
        (longest * 2).max(Duration::from_secs(10))
    }

    /// The canonical text the scripts read (13 comma-separated numbers).
    pub fn canonical(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.failure_rate_percent.unwrap_or(0.0),
            self.slow_call_rate_percent.unwrap_or(0.0),
            self.min_calls,
            ms(self.window),
            self.buckets,
            ms(self.cooldown),
            (self.cooldown_multiplier * 1000.0).round() as u64,
            ms(self.cooldown_max.max(self.cooldown)),
            (self.cooldown_jitter * 1000.0).round() as u64,
            self.half_open_probes,
            self.successes_to_close,
            self.quorum,
            ms(self.key_ttl()),
        )
    }

    /// Validates and compiles the policy into what each write carries.
    ///
    /// # Errors
    /// As [`validate`](Self::validate).
    pub fn compile(&self) -> Result<CompiledPolicy, PolicyError> {
        self.validate()?;
        let canonical = self.canonical();
        let fingerprint = format!("{:016x}", fnv1a(canonical.as_bytes()));
        Ok(CompiledPolicy {
            canonical: canonical.into(),
            fingerprint: fingerprint.into(),
            lease: self.probe_lease,
            ttl: self.key_ttl(),
        })
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A validated [`SharedPolicy`] in the form the scripts read, with its fingerprint.
#[derive(Clone, PartialEq, Eq)]
pub struct CompiledPolicy {
    pub(crate) canonical: Arc<str>,
    pub(crate) fingerprint: Arc<str>,
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
}

impl CompiledPolicy {
    /// The fingerprint: 16 hex digits of the FNV-1a hash of the canonical text.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The canonical text.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The probe lease.
    pub fn lease(&self) -> Duration {
        self.lease
    }
}

impl fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledPolicy")
            .field("canonical", &&*self.canonical)
            .field("fingerprint", &&*self.fingerprint)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_and_fingerprint() {
        let p = SharedPolicy::default();
        assert_eq!(
            p.canonical(),
            "50,0,20,10000,10,30000,1000,30000,0,1,1,1,60000"
        );
        let c = p.compile().unwrap();
        assert_eq!(c.fingerprint().len(), 16);
        let q = SharedPolicy {
            failure_rate_percent: Some(12.5),
            ..p.clone()
        };
        assert_eq!(q.canonical().split(',').next(), Some("12.5"));
        assert_ne!(q.compile().unwrap().fingerprint(), c.fingerprint());
    }

    #[test]
    fn invalid_fields_are_named() {
        let bad = SharedPolicy {
            buckets: 21,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "invalid shared policy: `buckets`: must be in 1..=20, got 21"
        );
        let bad = SharedPolicy {
            cooldown_max: Duration::from_secs(1),
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "cooldown_max");
        let bad = SharedPolicy {
            window: Duration::from_millis(5),
            buckets: 10,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "window");
        let bad = SharedPolicy {
            failure_rate_percent: Some(0.0),
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "failure_rate_percent");
    }
}
