//! The status API and the event stream against a real server (hyper on loopback), through a
//! real HTTP client: every kind of breaker is listed, and states and counts are the breakers'
//! own snapshots through an outage. Breakers run on a manual clock, so the API and the
//! snapshot read the same instant; the sampler is driven by `sample_now` (its own interval is
//! an hour), so the events are deterministic.

mod common;

use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker::clock::{Clock, ManualClock};
use breaker::config::{Format, Loader, PolicyRegistry};
use breaker::registry::Registry;
use breaker::{annotated, circuit_breaker, Pipeline};
use breaker_admin::Admin;
use common::{get, Events};
use serde_json::Value;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// Asserts that the API's view of a breaker is its snapshot, field by field.
fn assert_is_snapshot(json: &Value, b: &CircuitBreaker) {
    let s = b.snapshot();
    let ms = |d: Duration| d.as_millis() as u64;
    assert_eq!(json["time_in_state_ms"], ms(s.time_in_state), "{json}");
    assert_eq!(
        json["retry_after_ms"],
        serde_json::json!(s.retry_after.map(ms)),
        "{json}"
    );
    assert_counts_are_snapshot(json, b);
}

/// As [`assert_is_snapshot`] without the times, for a breaker on a clock that runs (an
/// annotated function's is tokio's).
fn assert_counts_are_snapshot(json: &Value, b: &CircuitBreaker) {
    let s = b.snapshot();
    assert_eq!(json["state"], s.state.as_str(), "{json}");
    assert_eq!(json["generation"], s.generation, "{json}");
    assert_eq!(
        json["consecutive_failures"], s.consecutive_failures,
        "{json}"
    );
    assert_eq!(json["window"]["calls"], s.window.calls, "{json}");
    assert_eq!(json["window"]["failures"], s.window.failures, "{json}");
    assert_eq!(
        json["window"]["failure_rate_percent"],
        s.window.failure_rate(),
        "{json}"
    );
    assert_eq!(json["probes_in_flight"], s.probes_in_flight, "{json}");
    assert_eq!(json["probe_successes"], s.probe_successes, "{json}");
    let t = s.totals.expect("these breakers keep totals");
    let totals = &json["totals"];
    for (field, value) in [
        ("admitted", t.admitted),
        ("rejected", t.rejected),
        ("succeeded", t.succeeded),
        ("failed", t.failed),
        ("cancelled", t.cancelled),
        ("late", t.late),
        ("opened", t.opened),
    ] {
        assert_eq!(totals[field], value, "totals.{field} in {json}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn states_and_counts_are_the_breakers_own_through_an_outage() {
    let time = ManualClock::new();
    let inventory = CircuitBreaker::builder(BreakerPolicy {
        // One trip rule, so the event can name it.
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: breaker::SlidingWindow::Count(10),
        min_calls: 4,
        cooldown: Duration::from_secs(10),
        cooldown_max: Duration::from_secs(10),
        ..BreakerPolicy::default()
    })
    .name("inventory")
    .clock(Clock::manual(&time))
    .totals(true)
    .build()
    .unwrap();
    let admin = Admin::builder()
        .annotated(false)
        .breaker(&inventory)
        .sample_every(HOUR)
        .history(10 * HOUR) // ten readings
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback());
    let mut events = Events::connect(addr).await;
    let (hello, data) = events.next().await;
    assert_eq!(
        (hello.as_str(), &data["sample_every_ms"]),
        ("hello", &Value::from(3_600_000))
    );
    assert_eq!(
        admin.sample_now(),
        0,
        "nothing changed since the baseline `build` took"
    );

    let view = |path: &'static str| async move { get(addr, path).await };
    // Healthy: 6 calls, one failure.
    for i in 0..6 {
        let p = inventory.try_acquire().unwrap();
        if i == 2 {
            p.failure()
        } else {
            p.success()
        }
        time.advance(Duration::from_millis(100));
    }
    let (status, json) = view("/api/v1/breakers/inventory").await;
    assert_eq!(status, 200);
    assert_is_snapshot(&json, &inventory);
    assert_eq!(json["state"], "closed");
    assert_eq!(json["window"]["calls"], 6);
    assert_eq!(json["window"]["shape"], "10 calls");
    assert_eq!(json["kind"], "plain");
    assert_eq!(json["source"]["kind"], "code");

    // The outage: failures until the rate rule trips, then rejections.
    while inventory.state() == State::Closed {
        inventory.try_acquire().unwrap().failure();
        time.advance(Duration::from_millis(100));
    }
    for _ in 0..5 {
        inventory.try_acquire().unwrap_err();
    }
    time.advance(Duration::from_secs(3));
    let (_, json) = view("/api/v1/breakers/inventory").await;
    assert_is_snapshot(&json, &inventory);
    assert_eq!(json["state"], "open");
    // Opened 3.1 s ago (the loop's last step moved the clock 100 ms) with a 10 s cooldown.
    assert_eq!(json["retry_after_ms"], 6900);
    assert_eq!(json["time_in_state_ms"], 3100);
    assert_eq!(json["totals"]["rejected"], 5);
    assert_eq!(
        admin.sample_now(),
        2,
        "a transition and a count of rejections"
    );
    let t = events.next_of(&["transition"]).await;
    assert_eq!(
        (&t["breaker"], &t["from"], &t["to"], &t["reason"]),
        (
            &Value::from("inventory"),
            &Value::from("closed"),
            &Value::from("open"),
            &Value::from("failure_rate"),
        )
    );
    assert_eq!(t["generation"], 1);
    let r = events.next_of(&["rejections"]).await;
    assert_eq!(
        (&r["count"], &r["state"]),
        (&Value::from(5), &Value::from("open"))
    );

    // The cooldown ends: a probe is in flight (half-open), then it fails: open again.
    time.advance(Duration::from_millis(6900));
    let probe = inventory.try_acquire().unwrap();
    let (_, json) = view("/api/v1/breakers/inventory").await;
    assert_is_snapshot(&json, &inventory);
    assert_eq!(
        (&json["state"], &json["probes_in_flight"]),
        (&Value::from("half-open"), &Value::from(1))
    );
    admin.sample_now();
    let t = events.next_of(&["transition"]).await;
    assert_eq!(
        (&t["to"], &t["reason"]),
        (&Value::from("half-open"), &Value::from("cooldown_elapsed"))
    );
    probe.failure();
    admin.sample_now();
    let t = events.next_of(&["transition"]).await;
    assert_eq!(
        (&t["to"], &t["reason"]),
        (&Value::from("open"), &Value::from("probe_failed"))
    );
    let (_, json) = view("/api/v1/breakers/inventory").await;
    assert_is_snapshot(&json, &inventory);

    // Recovery: the next probe succeeds and the breaker closes.
    time.advance(Duration::from_secs(10));
    inventory.try_acquire().unwrap().success();
    let (_, json) = view("/api/v1/breakers/inventory").await;
    assert_is_snapshot(&json, &inventory);
    assert_eq!(json["state"], "closed");
    assert_eq!(json["totals"]["opened"], 2);
    // Open -> half-open -> closed between two readings: each transition is its own event,
    // as the breaker made it, with its reason; nothing merged, nothing invented.
    assert_eq!(admin.sample_now(), 2, "two transitions, no rejections");
    for (from, to, reason, generation) in [
        ("open", "half-open", "cooldown_elapsed", 4),
        ("half-open", "closed", "probes_succeeded", 5),
    ] {
        let t = events.next_of(&["transition"]).await;
        assert_eq!(
            (&t["from"], &t["to"], &t["reason"], &t["generation"]),
            (
                &Value::from(from),
                &Value::from(to),
                &Value::from(reason),
                &Value::from(generation)
            ),
            "{t}"
        );
    }
    assert_eq!(admin.sample_now(), 0, "no transition since");

    // The list has the same row, with a history band of one letter per reading.
    let (_, list) = view("/api/v1/breakers?history=true").await;
    let row = &list["breakers"][0];
    assert_is_snapshot(row, &inventory);
    // (The last reading is the one that found no transition.)
    assert_eq!(row["history"]["states"], "ccohocc");
    assert_eq!(list["admin"], false);
}

#[derive(Debug)]
struct Down;

#[circuit_breaker(
    name = "admin_test_stock",
    threshold = 2,
    cooldown = "1h",
    timeout = "5s"
)]
async fn stock(fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(3)
    }
}

#[circuit_breaker(name = "admin_test_hosts", threshold = 1, cooldown = "1h", key = host)]
async fn by_host(host: &str, fail: bool) -> Result<u32, Down> {
    let _ = host;
    if fail {
        Err(Down)
    } else {
        Ok(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_breaker_is_listed_with_its_state() {
    // Annotated: one with its policy in the attribute, open; one keyed, one key open.
    stock(true).await.unwrap_err();
    stock(true).await.unwrap_err();
    by_host("a.example", true).await.unwrap_err();
    by_host("b.example", false).await.unwrap();
    // A policy registry loaded from text, its breaker open.
    let registry = PolicyRegistry::load(Loader::text(
        "[policies.payments]\nbreaker = \"1 consecutive, open 1h\"\nretry = \"3x exp\"\nidempotent = true\ntimeout = \"2s\"\n",
        Format::Toml,
    ))
    .unwrap();
    registry
        .breaker("payments")
        .unwrap()
        .try_acquire()
        .unwrap()
        .failure();
    // A pipeline, a plain breaker forced open, a keyed registry.
    let pipeline = Pipeline::builder()
        .breaker_policy(BreakerPolicy::default())
        .name("search")
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let plain = CircuitBreaker::builder(BreakerPolicy::default())
        .name("ledger")
        .totals(true)
        .build()
        .unwrap();
    plain.force_open();
    let factory = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(1),
        ..BreakerPolicy::default()
    })
    .name("tenants")
    .build_factory()
    .unwrap();
    let tenants: Registry<u64> = Registry::new(factory);
    tenants
        .get_or_create(&7)
        .unwrap()
        .try_acquire()
        .unwrap()
        .failure();
    tenants.get_or_create(&8).unwrap();

    let admin = Admin::builder()
        .policies(&registry)
        .pipeline("search", &pipeline)
        .breaker(&plain)
        .keyed("tenants", &tenants)
        .sample_every(HOUR)
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();
    let (status, list) = get(addr, "/api/v1/breakers").await;
    assert_eq!(status, 200);
    let rows = list["breakers"].as_array().unwrap();
    let row = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no row `{id}` in {list}"))
    };
    let payments = row("payments");
    assert_eq!(
        (&payments["kind"], &payments["state"]),
        (&Value::from("policy"), &Value::from("open"))
    );
    assert_eq!(
        payments["policy"]["retry"],
        "3x exp(100ms, factor 2, max 10s)"
    );
    assert_eq!(payments["policy"]["order"], "retry > breaker > timeout");
    assert_eq!(
        payments["layers"],
        serde_json::json!(["retry", "breaker", "timeout"])
    );
    assert_eq!(
        (
            &payments["source"]["kind"],
            &payments["source"]["generation"]
        ),
        (&Value::from("config"), &Value::from(0))
    );
    let stock_row = row("admin_test_stock");
    assert_eq!(
        (&stock_row["kind"], &stock_row["state"]),
        (&Value::from("function"), &Value::from("open"))
    );
    assert_counts_are_snapshot(stock_row, &annotated::breaker("admin_test_stock").unwrap());
    assert!(
        stock_row["policy"]["breaker"]
            .as_str()
            .unwrap()
            .starts_with("2 consecutive, open 1h"),
        "{stock_row}"
    );
    assert_eq!(stock_row["source"]["kind"], "attribute");
    assert_eq!(stock_row["policy"]["timeout"], "5s");
    let hosts = row("admin_test_hosts");
    assert_eq!(
        (&hosts["kind"], &hosts["group_state"]),
        (&Value::from("keyed"), &Value::from("open"))
    );
    assert_eq!(hosts["keys"]["count"], 2);
    assert_eq!(hosts["keys"]["by_state"]["open"], 1);
    // `group_state` is the worst state of any key; how many keys are open says how far.
    assert_eq!(
        (&hosts["keys"]["open"], &hosts["keys"]["count"]),
        (&Value::from(1), &Value::from(2))
    );
    assert_eq!(hosts["keys"]["max_keys"], 10_000);
    let search = row("search");
    assert_eq!(
        (&search["kind"], &search["state"]),
        (&Value::from("pipeline"), &Value::from("closed"))
    );
    assert_eq!(search["layers"], serde_json::json!(["breaker", "timeout"]));
    let ledger = row("ledger");
    assert_eq!(
        (&ledger["kind"], &ledger["state"]),
        (&Value::from("plain"), &Value::from("forced-open"))
    );
    let t = row("tenants");
    assert_eq!(
        (
            &t["group_state"],
            &t["keys"]["count"],
            &t["keys"]["max_keys"]
        ),
        (&Value::from("open"), &Value::from(2), &Value::Null)
    );

    // The keys of a group, busiest first, and one key.
    let (status, page) = get(addr, "/api/v1/breakers/admin_test_hosts/keys?limit=1").await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            &page["matched"],
            &page["keys"][0]["key"],
            &page["keys"][0]["state"]
        ),
        (
            &Value::from(2),
            &Value::from("a.example"),
            &Value::from("open")
        )
    );
    // A consecutive-only policy keeps no window: its shape is its rule.
    assert_eq!(
        page["keys"][0]["window"]["shape"], "1 consecutive",
        "{page}"
    );
    let (status, key) = get(addr, "/api/v1/breakers/tenants/keys/8").await;
    assert_eq!((status, &key["state"]), (200, &Value::from("closed")));
    let (status, page) = get(addr, "/api/v1/breakers/tenants/keys?state=closed").await;
    assert_eq!(
        (status, &page["matched"], &page["keys"][0]["key"]),
        (200, &Value::from(1), &Value::from("8"))
    );

    // Annotated functions, called or not.
    let (_, functions) = get(addr, "/api/v1/functions").await;
    let f = functions
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "admin_test_hosts")
        .unwrap();
    assert_eq!(
        (&f["keyed"], &f["called"]),
        (&Value::from(true), &Value::from(true))
    );
}

#[circuit_breaker(
    threshold = 3,
    rate = "5/s burst 2",
    hedge = "1x after 20ms",
    adaptive = "aimd 1..4",
    throttle = "k 2",
    timeout = "1s",
    idempotent = true,
    name = "admin_test_layered"
)]
async fn layered() -> Result<u32, Down> {
    Ok(1)
}

/// Asserts that `policy` (the API's `policy` object) has the DSL text of every layer of `p`,
/// each parsing back to the layer's policy, and `null` for every layer `p` lacks.
fn assert_policy_text(policy: &Value, p: &breaker::policy::Policy) {
    fn text<T: std::str::FromStr + PartialEq + std::fmt::Debug>(
        policy: &Value,
        field: &str,
        want: Option<T>,
    ) where
        T::Err: std::fmt::Debug,
    {
        match want {
            None => assert_eq!(policy[field], Value::Null, "{field} in {policy}"),
            Some(want) => {
                let text = policy[field]
                    .as_str()
                    .unwrap_or_else(|| panic!("no `{field}` text in {policy}"));
                let back: T = text
                    .parse()
                    .unwrap_or_else(|e| panic!("`{field}` = `{text}` does not parse back: {e:?}"));
                assert_eq!(back, want, "`{field}` = `{text}`");
            }
        }
    }
    text(policy, "breaker", p.breaker.clone());
    text(policy, "retry", p.retry);
    text(policy, "bulkhead", p.bulkhead);
    text(policy, "rate", p.rate_limit);
    text(policy, "hedge", p.hedge);
    text(policy, "adaptive", p.adaptive);
    text(policy, "throttle", p.throttle);
    let duration = |field: &str, want: Option<Duration>| match want {
        None => assert_eq!(policy[field], Value::Null, "{field} in {policy}"),
        Some(d) => assert_eq!(
            breaker::dsl::parse_duration(policy[field].as_str().unwrap()).unwrap(),
            d,
            "{field} in {policy}"
        ),
    };
    duration("timeout", p.timeout);
    duration("deadline", p.deadline);
    let order: Vec<&str> = p.effective_order().iter().map(|l| l.name()).collect();
    assert_eq!(policy["order"], order.join(" > "), "{policy}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_layer_of_a_policy_is_shown_as_dsl_text_that_parses_back() {
    layered().await.unwrap();
    // A pipeline built in code with every layer but retry, in its own order.
    let pipeline = Pipeline::builder()
        .breaker_policy("4 consecutive, open 1h".parse().unwrap())
        .name("admin_test_built")
        .bulkhead_policy("8 concurrent".parse().unwrap())
        .rate_limit("10/s burst 5".parse().unwrap())
        .hedge("2x after 50ms".parse().unwrap())
        .adaptive_limit("aimd 2..16".parse().unwrap())
        .throttle("k 1.5".parse().unwrap())
        .idempotent(true)
        .timeout(Duration::from_millis(300))
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    let admin = Admin::builder()
        .pipeline("admin_test_built", &pipeline)
        .sample_every(HOUR)
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();

    let (status, row) = get(addr, "/api/v1/breakers/admin_test_layered").await;
    assert_eq!(status, 200, "{row}");
    let attribute = annotated::functions()
        .find(|f| f.name() == "admin_test_layered")
        .unwrap()
        .attribute_policy()
        .unwrap();
    assert!(attribute.rate_limit.is_some() && attribute.throttle.is_some());
    assert_policy_text(&row["policy"], &attribute);
    // The canonical text, with the defaults written out.
    assert_eq!(row["policy"]["rate"], "5/s burst 2", "{row}");
    assert_eq!(row["policy"]["throttle"], "k 2 over 2m", "{row}");
    assert_eq!(row["window"]["shape"], "3 consecutive", "{row}");

    let (status, row) = get(addr, "/api/v1/breakers/admin_test_built").await;
    assert_eq!(status, 200, "{row}");
    assert_policy_text(&row["policy"], &pipeline.policy());
    for field in [
        "bulkhead", "rate", "hedge", "adaptive", "throttle", "deadline",
    ] {
        assert!(row["policy"][field].is_string(), "{field} in {row}");
    }
    assert_eq!(
        row["layers"],
        serde_json::json!(pipeline
            .order()
            .iter()
            .map(|l| l.name())
            .collect::<Vec<_>>())
    );
}
