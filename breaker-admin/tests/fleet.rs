//! A shared breaker through the admin, against a real server on loopback: the fleet's view is
//! shown beside the local one, an admin action goes to the fleet (not to the local breaker
//! alone), and a store that fails the action answers 502 and changes nothing. The fleet here
//! is a stand-in that records what it is asked (a protocol step: routing to the fleet); the
//! real store's faults are `breaker-redis`'s tests.

mod common;

use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_admin::{Action, Admin, Shared};
use common::{get, post};
use futures_util::future::BoxFuture;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const TOKEN: &str = "fleet-test-token-0123456789";

/// A fleet that applies actions to the local breaker as the store's update would, and
/// remembers them; `down` makes it fail as an unreachable store does.
struct Fleet {
    local: CircuitBreaker,
    asked: Arc<Mutex<Vec<Action>>>,
    down: Arc<Mutex<bool>>,
}

impl Shared for Fleet {
    fn local(&self) -> &CircuitBreaker {
        &self.local
    }
    fn fleet_view(&self) -> Value {
        json!({ "state": "open", "caused_by": "replica-b", "known": true })
    }
    fn act(&self, action: Action) -> BoxFuture<'static, Result<Value, String>> {
        let (local, asked, down) = (
            self.local.clone(),
            Arc::clone(&self.asked),
            *self.down.lock().unwrap(),
        );
        Box::pin(async move {
            if down {
                return Err("the store did not answer within 250ms".into());
            }
            asked.lock().unwrap().push(action);
            action.apply(&local);
            Ok(json!({ "state": local.state().as_str() }))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_breaker_shows_the_fleet_beside_the_local_view_and_acts_fleet_wide() {
    let local = CircuitBreaker::builder(BreakerPolicy::default())
        .name("payments")
        .totals(true)
        .build()
        .unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let down = Arc::new(Mutex::new(false));
    let admin = Admin::builder()
        .annotated(false)
        .shared(
            "payments",
            Fleet {
                local: local.clone(),
                asked: Arc::clone(&asked),
                down: Arc::clone(&down),
            },
        )
        .admin_token("ops", TOKEN)
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();
    let (_, row) = get(addr, "/api/v1/breakers/payments").await;
    assert_eq!(
        (&row["kind"], &row["state"]),
        (&Value::from("shared"), &Value::from("closed"))
    );
    assert_eq!(
        row["fleet"],
        json!({ "state": "open", "caused_by": "replica-b", "known": true })
    );

    let action = "/api/v1/breakers/payments/actions";
    let (status, body) = post(addr, action, Some(TOKEN), r#"{"action":"force-open"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fleet"], json!({ "state": "forced-open" }));
    assert_eq!(*asked.lock().unwrap(), [Action::ForceOpen]);
    assert_eq!(local.state(), State::ForcedOpen);

    *down.lock().unwrap() = true;
    let (status, body) = post(addr, action, Some(TOKEN), r#"{"action":"reset"}"#).await;
    assert_eq!(status, 502);
    assert_eq!(
        body["error"],
        "`reset` on shared breaker `payments` did not reach the fleet: the store did not answer within 250ms; nothing changed"
    );
    assert_eq!(
        local.state(),
        State::ForcedOpen,
        "nothing changed here either"
    );
}
