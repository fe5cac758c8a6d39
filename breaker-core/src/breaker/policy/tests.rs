use super::*;

#[test]
fn default_policy_is_valid() {
    assert_eq!(BreakerPolicy::default().validate(), Ok(()));
}

#[test]
fn cooldown_grows_and_caps() {
    let p = BreakerPolicy {
        cooldown: Duration::from_secs(10),
        cooldown_multiplier: 2.0,
        cooldown_max: Duration::from_secs(60),
        ..BreakerPolicy::default()
    };
    assert_eq!(p.cooldown_for(1), Duration::from_secs(10));
    assert_eq!(p.cooldown_for(2), Duration::from_secs(20));
    assert_eq!(p.cooldown_for(3), Duration::from_secs(40));
    assert_eq!(p.cooldown_for(4), Duration::from_secs(60));
    assert_eq!(p.cooldown_for(u32::MAX), Duration::from_secs(60));
}

#[test]
fn cooldowns_above_365_days_are_rejected_where_they_are_used() {
    let day = Duration::from_secs(86_400);
    let ok = BreakerPolicy {
        cooldown: MAX_COOLDOWN,
        cooldown_max: MAX_COOLDOWN,
        max_probe_wait: Some(MAX_COOLDOWN),
        ..BreakerPolicy::default()
    };
    assert_eq!(ok.validate(), Ok(()), "the bound itself is accepted");
    let nine_years = BreakerPolicy {
        cooldown: 9 * 365 * day,
        cooldown_max: 9 * 365 * day,
        ..BreakerPolicy::default()
    };
    assert_eq!(
        nine_years.validate().unwrap_err().to_string(),
        "invalid policy: `cooldown`: must be at most 365 days (31536000s), got 283824000s"
    );
    let grown = BreakerPolicy {
        cooldown_multiplier: 2.0,
        cooldown_max: MAX_COOLDOWN + Duration::from_secs(1),
        max_probe_wait: Some(366 * day),
        ..BreakerPolicy::default()
    };
    let errors: Vec<_> = grown
        .validate()
        .unwrap_err()
        .errors
        .iter()
        .map(|e| (e.field.key(), e.message.clone()))
        .collect();
    assert_eq!(
        errors,
        [
            (
                "cooldown_max",
                "must be at most 365 days (31536000s), got 31536001s".to_string()
            ),
            (
                "max_probe_wait",
                "must be at most 365 days (31536000s), got 31622400s".to_string()
            ),
        ]
    );
}

/// Why `cooldown_max` below the cooldown is accepted with a constant cooldown: it is never
/// read, and the cooldown stays exactly `cooldown` on every opening.
#[test]
fn cooldown_max_is_unused_and_unchecked_with_a_constant_cooldown() {
    for max in [Duration::ZERO, Duration::from_secs(5), MAX_COOLDOWN * 2] {
        let p = BreakerPolicy {
            cooldown: Duration::from_secs(60),
            cooldown_max: max,
            ..BreakerPolicy::default()
        };
        assert_eq!(p.validate(), Ok(()), "cooldown_max {max:?}");
        for streak in [1, 2, 10, u32::MAX] {
            assert_eq!(p.cooldown_for(streak), Duration::from_secs(60));
        }
    }
    // With growth it is read, so it is checked.
    let grows = BreakerPolicy {
        cooldown: Duration::from_secs(60),
        cooldown_max: Duration::ZERO,
        cooldown_multiplier: 2.0,
        ..BreakerPolicy::default()
    };
    assert_eq!(
        grows.validate().unwrap_err().errors[0].field,
        "cooldown_max"
    );
}

#[test]
fn all_errors_reported_at_once() {
    let p = BreakerPolicy {
        consecutive_failures: Some(0),
        cooldown: Duration::ZERO,
        half_open_probes: 0,
        ..BreakerPolicy::default()
    };
    let fields: Vec<_> = p
        .validate()
        .unwrap_err()
        .errors
        .iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(
        fields,
        ["consecutive_failures", "cooldown", "half_open_probes"]
    );
}
