//! The dashboard in a real browser: headless Chromium (Debian's `chromium` package) driven
//! over the DevTools protocol, against a real server on loopback. One browser start for every
//! check: the page loads with no console error, shows every breaker, turns a row open within
//! a second of a trip (at the default sampling interval), filters and sorts, shows a shared
//! breaker's fleet state in the fleet column (and only then shows that column) with its
//! actions sent to the fleet, and an admin action works with the token and is refused
//! without it.
//!
//! Without a browser the test says so and passes, unless `REQUIRE_BROWSER=1` (CI sets it):
//! then it fails. The browser is found at `$CHROME`, else as `chromium`, `chromium-browser`,
//! `google-chrome` or `google-chrome-stable` on the `PATH`. Waits are bounded polls of the
//! page (the browser is a real, separate process), each with a deadline.

mod common;

use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker::config::{Format, Loader, PolicyRegistry};
use breaker::registry::Registry;
use breaker::{circuit_breaker, Pipeline};
use breaker_admin::{Action, Admin, Shared};
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::log::{EventEntryAdded, LogEntryLevel};
use chromiumoxide::cdp::js_protocol::runtime::{
    ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown,
};
use chromiumoxide::Page;
use futures_util::StreamExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "browser-test-token-0123456789";

/// A shared breaker's fleet, standing in for a store (the real one is `tests/fleet_redis.rs`'s):
/// the fleet is open, tripped by another replica; actions are recorded.
struct Fleet {
    local: CircuitBreaker,
    asked: Arc<Mutex<Vec<Action>>>,
}

impl Shared for Fleet {
    fn local(&self) -> &CircuitBreaker {
        &self.local
    }
    fn fleet_view(&self) -> serde_json::Value {
        serde_json::json!({
            "state": "open", "caused_by": "replica-b", "retry_after_ms": 12_000,
            "known": true, "store": "healthy",
        })
    }
    fn act(
        &self,
        action: Action,
    ) -> futures_util::future::BoxFuture<'static, Result<serde_json::Value, String>> {
        self.asked.lock().unwrap().push(action);
        Box::pin(async { Ok(serde_json::json!({ "state": "forced-open" })) })
    }
}

/// The browser to drive, if this machine has one.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROME").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
    .find(|p| p.is_file())
}

/// Evaluates `js` until it returns `want`, within `within`; returns how long it took.
async fn wait_for(page: &Page, js: &str, want: serde_json::Value, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let got: serde_json::Value = page
            .evaluate(js)
            .await
            .unwrap_or_else(|e| panic!("`{js}`: {e}"))
            .into_value()
            .unwrap_or(serde_json::Value::Null);
        if got == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "`{js}` is {got}, not {want}, after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn eval(page: &Page, js: &str) -> serde_json::Value {
    page.evaluate(js)
        .await
        .unwrap_or_else(|e| panic!("`{js}`: {e}"))
        .into_value()
        .unwrap_or(serde_json::Value::Null)
}

/// Clicks the element `selector` in the page, in one step: the table is rebuilt every second,
/// so a node found first and clicked after may be gone by then.
async fn click(page: &Page, selector: &str) {
    let js = format!("(() => {{ const e = document.querySelector('{selector}'); if (!e) return false; e.click(); return true; }})()");
    assert_eq!(eval(page, &js).await, true, "no `{selector}` to click");
}

fn row_state(id: &str) -> String {
    format!("(document.querySelector('tbody tr[data-id=\"{id}\"]') || {{dataset: {{}}}}).dataset.state || null")
}

#[derive(Debug)]
struct Down;

#[circuit_breaker(name = "dashboard_stock", threshold = 2, cooldown = "1h")]
async fn stock(fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_headless_chromium() {
    let Some(exe) = chromium() else {
        assert!(
            std::env::var("REQUIRE_BROWSER").as_deref() != Ok("1"),
            "REQUIRE_BROWSER=1 but no Chromium was found (set CHROME, or `apt-get install -y chromium`)"
        );
        eprintln!(
            "SKIPPED the_dashboard_in_headless_chromium: no Chromium on this machine (set CHROME, \
             or `apt-get install -y chromium`; REQUIRE_BROWSER=1 makes this a failure)"
        );
        return;
    };

    // Every kind of breaker.
    stock(false).await.unwrap();
    let inventory = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(2),
        cooldown: Duration::from_secs(3600),
        cooldown_max: Duration::from_secs(3600),
        ..BreakerPolicy::default()
    })
    .name("inventory")
    .totals(true)
    .build()
    .unwrap();
    let ledger = CircuitBreaker::builder(BreakerPolicy::default())
        .name("ledger")
        .totals(true)
        .build()
        .unwrap();
    let registry = PolicyRegistry::load(Loader::text(
        "[policies.payments]\nbreaker = \"3 consecutive, open 30s\"\ntimeout = \"2s\"\n",
        Format::Toml,
    ))
    .unwrap();
    let factory = CircuitBreaker::builder(BreakerPolicy::default())
        .name("tenants")
        .build_factory()
        .unwrap();
    let tenants: Registry<String> = Registry::new(factory);
    tenants.get_or_create("acme").unwrap();
    let search = Pipeline::builder()
        .breaker_policy(BreakerPolicy::default())
        .name("search")
        .rate_limit("5/s burst 2".parse().unwrap())
        .throttle("k 2".parse().unwrap())
        .build()
        .unwrap();
    let orders = CircuitBreaker::builder(BreakerPolicy::default())
        .name("orders")
        .build()
        .unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let admin = Admin::builder()
        .shared(
            "orders",
            Fleet {
                local: orders.clone(),
                asked: Arc::clone(&asked),
            },
        )
        .policies(&registry)
        .pipeline("search", &search)
        .breaker(&inventory)
        .breaker(&ledger)
        .keyed("tenants", &tenants)
        .admin_token("ops", TOKEN)
        .build();
    let server = admin.listen().await.unwrap();
    let url = server.url();
    let (_, list) = common::get(server.local_addr(), "/api/v1/breakers").await;
    let mut ids: Vec<String> = list["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    for id in [
        "dashboard_stock",
        "inventory",
        "ledger",
        "orders",
        "payments",
        "search",
        "tenants",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} in {ids:?}");
    }

    // One browser, with a fresh profile.
    let profile =
        std::env::temp_dir().join(format!("breaker-admin-chromium-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let config = BrowserConfig::builder()
        .chrome_executable(&exe)
        .disable_default_args()
        .no_sandbox()
        .user_data_dir(&profile)
        .window_size(1400, 1000)
        .args([
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .launch_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let (mut browser, mut handler) = Browser::launch(config)
        .await
        .unwrap_or_else(|e| panic!("{} does not start: {e}", exe.display()));
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });

    let page = browser.new_page("about:blank").await.unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut console = page
        .event_listener::<EventConsoleApiCalled>()
        .await
        .unwrap();
    let mut thrown = page.event_listener::<EventExceptionThrown>().await.unwrap();
    let mut logged = page.event_listener::<EventEntryAdded>().await.unwrap();
    page.execute(chromiumoxide::cdp::browser_protocol::log::EnableParams::default())
        .await
        .unwrap();
    let collect = {
        let errors = Arc::clone(&errors);
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    Some(e) = console.next() => matches!(e.r#type, ConsoleApiCalledType::Error | ConsoleApiCalledType::Assert)
                        .then(|| format!("console.{:?}: {:?}", e.r#type, e.args.iter().map(|a| a.value.clone()).collect::<Vec<_>>())),
                    Some(e) = thrown.next() => Some(format!("uncaught: {:?}", e.exception_details)),
                    Some(e) = logged.next() => (e.entry.level == LogEntryLevel::Error)
                        .then(|| format!("log ({:?}): {} {:?}", e.entry.source, e.entry.text, e.entry.url)),
                    else => break,
                };
                if let Some(line) = line {
                    errors.lock().unwrap().push(line);
                }
            }
        })
    };

    page.goto(url.as_str()).await.unwrap();
    // Every breaker is shown.
    let shown =
        "Array.from(document.querySelectorAll('tbody tr[data-id]')).map(r => r.dataset.id).sort()";
    wait_for(
        &page,
        shown,
        serde_json::json!(ids),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(eval(&page, &row_state("inventory")).await, "closed");
    assert_eq!(eval(&page, &row_state("tenants")).await, "closed");
    // Every layer's policy text is shown.
    let policy = eval(
        &page,
        "document.querySelector('tbody tr[data-id=\"search\"] td.policy').textContent",
    )
    .await;
    for layer in ["breaker: ", "rate: 5/s burst 2", "throttle: k 2 over 2m"] {
        assert!(
            policy.as_str().unwrap().contains(layer),
            "`{layer}` in {policy}"
        );
    }
    assert_eq!(
        eval(&page, "document.querySelector('#stream').textContent").await,
        "live"
    );

    // The fleet column: shown (a shared breaker is listed), the fleet's state and who made it.
    let fleet =
        "(() => { const td = document.querySelector('tbody tr[data-id=\"orders\"] td.fleet'); \
                 return td ? [td.dataset.fleetState, td.textContent] : null; })()";
    assert_eq!(
        eval(&page, fleet).await,
        serde_json::json!(["open", "openby replica-b · 12s left"])
    );
    assert_eq!(
        eval(&page, "document.querySelector('th.fleet-col').hidden").await,
        false
    );
    assert_eq!(
        eval(
            &page,
            "document.querySelector('tbody tr[data-id=\"inventory\"] td.fleet').textContent"
        )
        .await,
        "",
        "a local breaker's fleet cell is empty"
    );

    // A trip shows within a second, at the default sampling interval (250 ms).
    inventory.try_acquire().unwrap().failure();
    inventory.try_acquire().unwrap().failure();
    assert_eq!(inventory.state(), State::Open);
    let took = wait_for(
        &page,
        &row_state("inventory"),
        "open".into(),
        Duration::from_secs(1),
    )
    .await;
    println!("the row turned open {took:?} after the trip");

    // Filter and sort.
    page.find_element("#filter")
        .await
        .unwrap()
        .click()
        .await
        .unwrap()
        .type_str("pay")
        .await
        .unwrap();
    wait_for(
        &page,
        shown,
        serde_json::json!(["payments"]),
        Duration::from_secs(5),
    )
    .await;
    page.evaluate("(() => { const f = document.querySelector('#filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()")
        .await
        .unwrap();
    page.find_element("th[data-sort=state]")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let first = "document.querySelector('tbody tr[data-id]').dataset.id";
    wait_for(&page, first, "inventory".into(), Duration::from_secs(5)).await;

    // An admin action with the token works...
    let button = |id: &str, action: &str| {
        format!("tbody tr[data-id=\"{id}\"] button[data-action=\"{action}\"]")
    };
    page.find_element("#token")
        .await
        .unwrap()
        .click()
        .await
        .unwrap()
        .type_str(TOKEN)
        .await
        .unwrap();
    click(&page, &button("ledger", "force-open")).await;
    let notice = "document.querySelector('#notice').dataset.status || null";
    wait_for(&page, notice, "200".into(), Duration::from_secs(5)).await;
    assert_eq!(ledger.state(), State::ForcedOpen);
    wait_for(
        &page,
        &row_state("ledger"),
        "forced-open".into(),
        Duration::from_secs(5),
    )
    .await;
    // A shared breaker's button goes to its fleet.
    page.evaluate("document.querySelector('#notice').dataset.status = ''")
        .await
        .unwrap();
    click(&page, &button("orders", "force-open")).await;
    wait_for(&page, notice, "200".into(), Duration::from_secs(5)).await;
    assert_eq!(*asked.lock().unwrap(), [Action::ForceOpen]);
    assert!(
        errors.lock().unwrap().is_empty(),
        "console errors: {:?}",
        errors.lock().unwrap()
    );

    // ... and without it is refused, and the breaker is left as it was.
    page.evaluate("document.querySelector('#token').value = ''")
        .await
        .unwrap();
    click(&page, &button("ledger", "reset")).await;
    wait_for(&page, notice, "401".into(), Duration::from_secs(5)).await;
    assert_eq!(ledger.state(), State::ForcedOpen);
    let text = eval(&page, "document.querySelector('#notice').textContent").await;
    assert!(
        text.as_str()
            .unwrap()
            .starts_with("refused (401): missing credentials"),
        "{text}"
    );
    // The only error the page may log now is the browser's own line for the 401 response.
    let errors = errors.lock().unwrap().clone();
    assert!(
        errors
            .iter()
            .all(|e| e.starts_with("log (Network)") && e.contains("401")),
        "console errors: {errors:?}"
    );

    browser.close().await.unwrap();
    let _ = browser.wait().await;
    events.abort();
    collect.abort();
    let _ = std::fs::remove_dir_all(&profile);
}
