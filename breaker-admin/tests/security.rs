//! Admin actions and the checks every request goes through, against a real server (hyper on
//! loopback) with a real client, and raw requests for what a URL parser would clean up:
//! no token, a wrong token, another scheme, a cookie, a token in the query string, an
//! oversized body (declared, and chunked), a malformed body, an unknown action, an unknown
//! breaker, path traversal, the wrong method, actions off, a user-supplied auth layer; every
//! action a `tracing` event naming who and what.

mod common;

use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker::config::{Loader, PolicyRegistry};
use breaker::registry::Registry;
use breaker_admin::{Admin, Principal};
use common::{get, logged, post, raw, raw_get, was_logged, Events};
use serde_json::Value;
use std::time::Duration;

const TOKEN: &str = "test-token-0123456789abcdef";

struct Setup {
    admin: Admin,
    inventory: CircuitBreaker,
    hosts: Registry<String>,
    _server: breaker_admin::Listening,
    addr: std::net::SocketAddr,
}

async fn setup(admin_on: bool) -> Setup {
    logged();
    let inventory = CircuitBreaker::builder(BreakerPolicy::default())
        .name("inventory")
        .build()
        .unwrap();
    let factory = CircuitBreaker::builder(BreakerPolicy::default())
        .name("hosts")
        .build_factory()
        .unwrap();
    let hosts: Registry<String> = Registry::new(factory);
    hosts.get_or_create("a/b.example").unwrap();
    let mut builder = Admin::builder()
        .annotated(false)
        .breaker(&inventory)
        .keyed("hosts", &hosts)
        .sample_every(Duration::from_secs(3600));
    if admin_on {
        builder = builder.admin_token("ops", TOKEN);
    }
    let admin = builder.build();
    let server = admin.listen().await.unwrap();
    Setup {
        addr: server.local_addr(),
        admin,
        inventory,
        hosts,
        _server: server,
    }
}

const ACTION: &str = "/api/v1/breakers/inventory/actions";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_with_the_token_works_and_is_logged_with_who_and_what() {
    let s = setup(true).await;
    let (status, body) = post(
        s.addr,
        ACTION,
        Some(TOKEN),
        r#"{"action":"force-open","reason":"maintenance"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "forced-open");
    assert_eq!(body["who"], "ops");
    assert_eq!(s.inventory.state(), State::ForcedOpen);
    assert!(was_logged(&[
        "who=\"ops\"",
        "action=\"force-open\"",
        "breaker=\"inventory\"",
        "peer=\"127.0.0.1:",
        "reason=\"maintenance\""
    ]));
    for (action, state) in [
        ("force-closed", State::ForcedClosed),
        ("reset", State::Closed),
        ("disable", State::ForcedClosed),
    ] {
        let (status, _) = post(
            s.addr,
            ACTION,
            Some(TOKEN),
            &format!(r#"{{"action":"{action}"}}"#),
        )
        .await;
        assert_eq!((status, s.inventory.state()), (200, state), "{action}");
    }
    // One key of a keyed group; the key has a `/`, percent-encoded in the path.
    let (status, body) = post(
        s.addr,
        "/api/v1/breakers/hosts/keys/a%2Fb.example/actions",
        Some(TOKEN),
        r#"{"action":"force-open"}"#,
    )
    .await;
    assert_eq!((status, &body["key"]), (200, &Value::from("a/b.example")));
    assert_eq!(
        s.hosts.get("a/b.example").unwrap().state(),
        State::ForcedOpen
    );
    assert!(was_logged(&[
        "who=\"ops\"",
        "action=\"force-open\"",
        "breaker=\"hosts\"",
        "key=\"a/b.example\""
    ]));
    assert_eq!(s.admin.event_readers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_a_wrong_one_another_scheme_or_a_cookie_are_refused_with_401() {
    let s = setup(true).await;
    let body = r#"{"action":"force-open"}"#;
    let request = |auth: &str| {
        format!(
            "POST {ACTION} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let missing = raw(s.addr, request("").as_bytes()).await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.header("www-authenticate").unwrap(),
        "Bearer realm=\"breaker-admin\""
    );
    assert!(missing.json()["error"]
        .as_str()
        .unwrap()
        .starts_with("missing credentials"));
    let wrong = raw(
        s.addr,
        request("Authorization: Bearer not-the-token-0123456789\r\n").as_bytes(),
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"invalid_token\""));
    assert_eq!(wrong.json()["error"], "the bearer token is not valid");
    let basic = raw(
        s.addr,
        request("Authorization: Basic b3BzOnRlc3Q=\r\n").as_bytes(),
    )
    .await;
    assert_eq!(basic.status, 401);
    assert!(basic.json()["error"]
        .as_str()
        .unwrap()
        .contains("not `Bearer <token>`"));
    // The right token in a cookie: cookies are never read.
    let cookie = raw(
        s.addr,
        request(&format!(
            "Cookie: token={TOKEN}; authorization=Bearer%20{TOKEN}\r\n"
        ))
        .as_bytes(),
    )
    .await;
    assert_eq!(cookie.status, 401);
    assert_eq!(
        s.inventory.state(),
        State::Closed,
        "nothing was carried out"
    );
    // Refusals are logged too, with where they came from.
    assert!(was_logged(&[
        "status=401",
        "wrong bearer token",
        "peer=127.0.0.1:"
    ]));
    assert!(was_logged(&["status=401", "no bearer token"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_query_string_is_refused_on_every_route_even_when_right() {
    let s = setup(true).await;
    let (status, body) = post(
        s.addr,
        &format!("{ACTION}?token={TOKEN}"),
        Some(TOKEN),
        r#"{"action":"force-open"}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("query parameter `token` looks like a credential"),
        "{body}"
    );
    assert_eq!(s.inventory.state(), State::Closed);
    let (status, _) = get(s.addr, &format!("/api/v1/breakers?access_token={TOKEN}")).await;
    assert_eq!(status, 400);
    let (status, _) = get(s.addr, "/?Api_Key=x").await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_bodies_unknown_actions_and_breakers_get_clear_answers() {
    let s = setup(true).await;
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    // Declared too large: refused before reading.
    let big = raw(s.addr, format!("POST {ACTION} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: 1000000\r\n\r\n").as_bytes()).await;
    assert_eq!(big.status, 413);
    assert!(big.json()["error"]
        .as_str()
        .unwrap()
        .contains("over 4096 bytes"));
    // Chunked, no length declared: cut at the limit.
    let chunk = "x".repeat(3000);
    let chunked = raw(s.addr, format!("POST {ACTION} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Transfer-Encoding: chunked\r\n\r\nbb8\r\n{chunk}\r\nbb8\r\n{chunk}\r\n0\r\n\r\n").as_bytes()).await;
    assert_eq!(chunked.status, 413);
    let (status, body) = post(s.addr, ACTION, Some(TOKEN), r#"{"action": "force-open""#).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("malformed body: EOF while parsing"),
        "{body}"
    );
    let (status, body) = post(s.addr, ACTION, Some(TOKEN), r#"{"action":"explode"}"#).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "unknown action `explode`; expected one of `force-open`, `force-closed`, `disable`, `reset`");
    let (status, body) = post(
        s.addr,
        ACTION,
        Some(TOKEN),
        r#"{"action":"reset","extra":1}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `extra`"),
        "{body}"
    );
    let (status, body) = post(s.addr, ACTION, Some(TOKEN), "").await;
    assert_eq!(status, 400);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .starts_with("expected a JSON body"));
    let form = raw(s.addr, format!("POST {ACTION} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\n{auth}Content-Length: 17\r\n\r\naction=force-open").as_bytes()).await;
    assert_eq!(form.status, 415);
    let (status, body) = post(
        s.addr,
        "/api/v1/breakers/nope/actions",
        Some(TOKEN),
        r#"{"action":"reset"}"#,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        body["error"],
        "unknown breaker `nope`; `GET /api/v1/breakers` lists them"
    );
    let (status, body) = post(
        s.addr,
        "/api/v1/breakers/hosts/keys/zzz/actions",
        Some(TOKEN),
        r#"{"action":"reset"}"#,
    )
    .await;
    assert_eq!(status, 404);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .starts_with("breaker `hosts` has no key `zzz`"));
    let (status, _) = post(
        s.addr,
        "/api/v1/breakers/hosts/actions",
        Some(TOKEN),
        r#"{"action":"reset"}"#,
    )
    .await;
    assert_eq!(status, 400, "a keyed group is acted on one key at a time");
    let (status, _) = get(s.addr, "/api/v1/breakers/nope").await;
    assert_eq!(status, 404);
    let (status, body) = get(s.addr, "/api/v1/breakers/hosts/keys?limit=0").await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"],
        "query parameter `limit=0`: expected a whole number in 1..=500"
    );
    let (status, body) = get(s.addr, "/api/v1/breakers?histroy=true").await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"],
        "unknown query parameter `histroy`; this route reads `history`"
    );
    assert_eq!(s.inventory.state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_traversal_in_names_is_refused() {
    let s = setup(true).await;
    for path in [
        "/api/v1/breakers/../../../etc/passwd",
        "/api/v1/breakers/%2e%2e/actions",
        "/api/v1/breakers/..%2F..%2Fetc%2Fpasswd",
        "/api/v1/breakers/hosts/keys/..%5C..%5Cwindows",
        "/../app.js",
        "/api/v1/breakers/a%00b",
    ] {
        let r = raw_get(s.addr, path).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(
            r.json()["error"].as_str().unwrap().contains("is refused"),
            "{path}: {}",
            r.body
        );
    }
    let r = raw_get(s.addr, "/api/v1/breakers/%zz").await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .contains("not valid percent-encoded UTF-8"));
    // A name with a dot that is not a traversal is only a name.
    let r = raw_get(s.addr, "/api/v1/breakers/a..b").await;
    assert_eq!(r.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_unknown_routes_and_actions_off_get_their_status() {
    let s = setup(false).await;
    let (status, body) = post(s.addr, ACTION, Some(TOKEN), r#"{"action":"force-open"}"#).await;
    assert_eq!(status, 403);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .starts_with("admin actions are off"));
    assert_eq!(s.inventory.state(), State::Closed);
    let r = raw_get(s.addr, ACTION).await;
    assert_eq!(
        (r.status, r.header("allow").as_deref()),
        (405, Some("POST"))
    );
    let r = raw(
        s.addr,
        b"DELETE /api/v1/breakers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(
        (r.status, r.header("allow").as_deref()),
        (405, Some("GET, HEAD"))
    );
    let (status, body) = get(s.addr, "/api/v2/breakers").await;
    assert_eq!(status, 404);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .starts_with("no route `GET /api/v2/breakers`"));
    // The dashboard: its own assets only, under a strict content security policy.
    let page = raw_get(s.addr, "/").await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .starts_with("default-src 'none'; script-src 'self'"));
    assert_eq!(page.header("x-frame-options").as_deref(), Some("DENY"));
    assert!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "no other origin"
    );
    for asset in ["/app.js", "/app.css"] {
        let r = raw_get(s.addr, asset).await;
        assert_eq!(r.status, 200, "{asset}");
        assert!(
            !r.body.contains("https://") && !r.body.contains("http://"),
            "{asset} loads nothing else"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_supplied_auth_layer_guards_actions_and_names_the_caller() {
    logged();
    let inventory = CircuitBreaker::builder(BreakerPolicy::default())
        .name("layered")
        .build()
        .unwrap();
    // The program's own auth: a header it trusts (in real life mTLS or a session), mapped
    // to a principal; anything else is refused by the layer itself.
    let layer = tower::layer::layer_fn(|inner: breaker_admin::Actions| {
        tower::service_fn(
            move |mut req: http::Request<http_body_util::Full<bytes::Bytes>>| {
                let mut inner = inner.clone();
                async move {
                    use tower::Service;
                    let user = req
                        .headers()
                        .get("x-user")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    match user {
                        Some(u) if u == "alice" => {
                            req.extensions_mut().insert(Principal(u));
                            inner.call(req).await.map_err(|e| match e {})
                        }
                        _ => {
                            let mut r = http::Response::new(breaker_admin::Body::default());
                            *r.status_mut() = http::StatusCode::FORBIDDEN;
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    }
                }
            },
        )
    });
    let admin = Admin::builder()
        .annotated(false)
        .breaker(&inventory)
        .admin_layer(layer)
        .build();
    let server = admin.listen().await.unwrap();
    let url = format!(
        "http://{}/api/v1/breakers/layered/actions",
        server.local_addr()
    );
    let send = |user: Option<&'static str>| {
        let mut req = common::client()
            .post(url.clone())
            .header("content-type", "application/json")
            .body(r#"{"action":"force-open"}"#);
        if let Some(u) = user {
            req = req.header("x-user", u);
        }
        req.send()
    };
    assert_eq!(send(Some("mallory")).await.unwrap().status(), 403);
    assert_eq!(send(None).await.unwrap().status(), 403);
    assert_eq!(inventory.state(), State::Closed);
    let r = send(Some("alice")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(inventory.state(), State::ForcedOpen);
    assert!(was_logged(&[
        "who=\"alice\"",
        "action=\"force-open\"",
        "breaker=\"layered\""
    ]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_reads_the_file_again_and_reports_its_errors() {
    let dir = std::env::temp_dir().join(format!("breaker-admin-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("policies.toml");
    std::fs::write(
        &file,
        "[policies.payments]\nbreaker = \"3 consecutive, open 10s\"\n",
    )
    .unwrap();
    let registry = PolicyRegistry::load(Loader::file(&file)).unwrap();
    let admin = Admin::builder()
        .annotated(false)
        .policies(&registry)
        .admin_token("ops", TOKEN)
        .build();
    let server = admin.listen().await.unwrap();
    let addr = server.local_addr();
    let (_, row) = get(addr, "/api/v1/breakers/payments").await;
    assert_eq!(
        (&row["source"]["kind"], &row["source"]["generation"]),
        (&Value::from("file"), &Value::from(0))
    );
    assert_eq!(row["source"]["path"], file.display().to_string());
    std::fs::write(
        &file,
        "[policies.payments]\nbreaker = \"5 consecutive, open 10s\"\n",
    )
    .unwrap();
    let (status, body) = post(addr, "/api/v1/reload", Some(TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["reloaded"][0]["changed"],
        serde_json::json!(["payments"])
    );
    let (_, row) = get(addr, "/api/v1/breakers/payments").await;
    assert_eq!(row["source"]["generation"], 1);
    assert!(
        row["policy"]["breaker"]
            .as_str()
            .unwrap()
            .starts_with("5 consecutive"),
        "{row}"
    );
    // A broken file: 422 with the errors; the policy in force stays.
    std::fs::write(&file, "[policies.payments]\nbreaker = \"5 parsecs\"\n").unwrap();
    let (status, body) = post(addr, "/api/v1/reload", Some(TOKEN), "").await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["errors"][0].as_str().unwrap().contains("5 parsecs"),
        "{body}"
    );
    assert_eq!(registry.generation(), 1);
    let (status, _) = post(addr, "/api/v1/reload", None, "").await;
    assert_eq!(status, 401);
    assert!(was_logged(&["who=\"ops\"", "action=\"reload\""]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The transition an action makes reaches the event stream before the action's own event
/// (not a sampler tick later: the admin samples once an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actions_transition_is_streamed_before_the_action() {
    let s = setup(true).await;
    let mut events = Events::connect(s.addr).await;
    events.next().await; // hello
    let (status, body) = post(s.addr, ACTION, Some(TOKEN), r#"{"action":"force-open"}"#).await;
    assert_eq!(status, 200, "{body}");
    let first = events.next_of(&["transition", "action"]).await;
    assert_eq!(
        (&first["to"], &first["reason"]),
        (&Value::from("forced-open"), &Value::from("manual")),
        "{first}"
    );
    let second = events.next_of(&["transition", "action"]).await;
    assert_eq!(second["action"], "force-open", "{second}");
    drop(s.admin);
}
