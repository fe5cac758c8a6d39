//! [`AdminService`]: the routes, the checks every request goes through, and the responses.
//!
//! # Routes
//! | method | path | what |
//! |---|---|---|
//! | GET | `/` | the dashboard (`/app.js`, `/app.css` its assets) |
//! | GET | `/api/v1` | this table, as JSON |
//! | GET | `/api/v1/breakers[?history=true]` | every breaker row |
//! | GET | `/api/v1/breakers/{id}` | one row, with its history |
//! | GET | `/api/v1/breakers/{id}/keys[?offset=0&limit=50&state=open]` | a keyed group's keys, busiest first |
//! | GET | `/api/v1/breakers/{id}/keys/{key}` | one key's breaker (and its `fleet` view, when the key is shared by a fleet) |
//! | GET | `/api/v1/functions` | the `#[circuit_breaker]` functions, called or not |
//! | GET | `/api/v1/events` | server-sent events (see [`events`](crate::events)) |
//! | POST | `/api/v1/breakers/{id}/actions` | an admin action: `{"action": "force-open"}` |
//! | POST | `/api/v1/breakers/{id}/keys/{key}/actions` | an admin action on one key |
//! | POST | `/api/v1/reload` | reload the policy registries' files |
//!
//! An action on a breaker (or key) shared by a fleet is carried out by the fleet's store, and
//! its answer has the fleet's view after it (`fleet`; see [`fleet`](crate::fleet)).
//!
//! `{id}` and `{key}` are percent-encoded path segments.
//!
//! # Checks, in order, with their status
//! - a credential-like query parameter (`?token=`): `400`, on every route;
//! - a path segment `.` or `..` (also percent-encoded), or a decoded id with such a component:
//!   `400` (path traversal); a segment that is not valid percent-encoded UTF-8: `400`;
//! - no such route: `404`; a route without that method: `405` with `Allow`;
//! - admin routes: actions off: `403`; a body over [`MAX_BODY_BYTES`]: `413`; a body that is not
//!   JSON: `415`; no `Authorization`: `401` with `WWW-Authenticate: Bearer`; another scheme or
//!   a wrong token: `401` with `error="invalid_token"`;
//! - an unknown breaker or key: `404`; a malformed body or query: `400`; an unknown action:
//!   `400` listing the actions;
//! - too many event-stream readers: `503`;
//! - an action on a shared breaker that the fleet's store did not carry out: `502`, naming
//!   the store's error (nothing changed, here or elsewhere).
//!
//! Every body is JSON (`{"error": "...", "status": N}` for errors), except the dashboard's.

use crate::admin::{Action, Guard, Inner, MAX_BODY_BYTES};
use crate::auth::{self, Principal, Verdict};
use crate::catalog::{self, Item};
use crate::events::Event;
use crate::view::{self, BreakerJson};
use breaker_core::breaker::State;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use serde::Serialize;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::ServiceExt;
use tower_service::Service;

/// The body of every response of the [`AdminService`]: boxed, so one type covers JSON, the
/// dashboard and the event stream.
pub type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The error type a request body may have.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The peer's address, as a server puts it in a request's extensions; the listener of
/// [`Admin::listen`](crate::Admin::listen) does, and admin actions name it in their `tracing` events. A
/// program mounting the service in its own server may insert it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The tower service of an [`Admin`](crate::Admin): see the [module docs](self) for its
/// routes. Cloning is cheap. It never fails: every problem is a response with a status.
#[derive(Clone)]
pub struct AdminService {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for AdminService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminService").finish_non_exhaustive()
    }
}

impl<B> Service<Request<B>> for AdminService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { Ok(handle(inner, req).await) })
    }
}

// --- Responses ----------------------------------------------------------------------------------

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|e| match e {}).boxed()
}

fn with_common_headers(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response<Body> {
    let body = serde_json::to_vec(value).expect("the API's values serialise");
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    with_common_headers(r)
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    status: u16,
}

/// An error response: `{"error": message, "status": N}`.
pub(crate) fn error(status: StatusCode, message: impl AsRef<str>) -> Response<Body> {
    json(
        status,
        &ErrorBody {
            error: message.as_ref(),
            status: status.as_u16(),
        },
    )
}

/// A refusal, before it becomes a response (small, unlike a response).
pub(crate) struct Refusal(StatusCode, String);

impl From<Refusal> for Response<Body> {
    fn from(r: Refusal) -> Response<Body> {
        error(r.0, r.1)
    }
}

/// The admin was dropped while a request was under way.
pub(crate) fn gone() -> Response<Body> {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the admin behind this service has been dropped",
    )
}

fn asset(content_type: &'static str, text: &'static str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(text.as_bytes())));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Everything the page needs is served here: no inline script, no other origin.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    with_common_headers(r)
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

// --- Paths --------------------------------------------------------------------------------------

/// Decodes `%XX` escapes; `None` if an escape is malformed or the result is not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Why a path was refused before routing.
enum PathError {
    Traversal(String),
    Encoding(String),
}

/// The decoded segments of `path` (without the leading `/`; a trailing `/` dropped).
fn segments(path: &str) -> Result<Vec<String>, PathError> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    trimmed
        .split('/')
        .map(|raw| {
            let decoded = percent_decode(raw).ok_or_else(|| PathError::Encoding(raw.to_owned()))?;
            let traversal = decoded
                .split(['/', '\\'])
                .any(|part| part == "." || part == "..");
            if traversal || decoded.contains('\0') {
                return Err(PathError::Traversal(raw.to_owned()));
            }
            Ok(decoded)
        })
        .collect()
}

/// The query's parameters, decoded (`+` is a space).
fn query_params(query: &str) -> Result<Vec<(String, String)>, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let dec = |s: &str| {
                percent_decode(&s.replace('+', " ")).ok_or_else(|| {
                    format!("query parameter `{pair}` is not valid percent-encoding")
                })
            };
            Ok((dec(k)?, dec(v)?))
        })
        .collect()
}

/// A route, parsed.
enum Route {
    Index,
    Js,
    Css,
    Api,
    List,
    One(String),
    Keys(String),
    Key(String, String),
    Functions,
    Events,
    Act(String, Option<String>),
    Reload,
}

impl Route {
    fn parse(segs: &[String]) -> Option<Route> {
        let s: Vec<&str> = segs.iter().map(String::as_str).collect();
        Some(match s.as_slice() {
            [] | ["index.html"] => Route::Index,
            ["app.js"] => Route::Js,
            ["app.css"] => Route::Css,
            ["api", "v1"] => Route::Api,
            ["api", "v1", "breakers"] => Route::List,
            ["api", "v1", "breakers", id] => Route::One((*id).to_owned()),
            ["api", "v1", "breakers", id, "keys"] => Route::Keys((*id).to_owned()),
            ["api", "v1", "breakers", id, "keys", key] => {
                Route::Key((*id).to_owned(), (*key).to_owned())
            }
            ["api", "v1", "breakers", id, "actions"] => Route::Act((*id).to_owned(), None),
            ["api", "v1", "breakers", id, "keys", key, "actions"] => {
                Route::Act((*id).to_owned(), Some((*key).to_owned()))
            }
            ["api", "v1", "functions"] => Route::Functions,
            ["api", "v1", "events"] => Route::Events,
            ["api", "v1", "reload"] => Route::Reload,
            _ => return None,
        })
    }

    fn is_admin(&self) -> bool {
        matches!(self, Route::Act(..) | Route::Reload)
    }

    fn allows(&self, m: &Method) -> bool {
        if self.is_admin() {
            m == Method::POST
        } else {
            m == Method::GET || m == Method::HEAD
        }
    }
}

/// The API index, `GET /api/v1`.
const API_INDEX: &str = r#"{"routes":[
{"method":"GET","path":"/api/v1/breakers","query":"history=true|false"},
{"method":"GET","path":"/api/v1/breakers/{id}"},
{"method":"GET","path":"/api/v1/breakers/{id}/keys","query":"offset=N&limit=1..500&state=closed|open|half-open|forced-open|forced-closed"},
{"method":"GET","path":"/api/v1/breakers/{id}/keys/{key}"},
{"method":"GET","path":"/api/v1/functions"},
{"method":"GET","path":"/api/v1/events","content_type":"text/event-stream"},
{"method":"POST","path":"/api/v1/breakers/{id}/actions","body":{"action":"force-open|force-closed|disable|reset"},"auth":"Authorization: Bearer <token>"},
{"method":"POST","path":"/api/v1/breakers/{id}/keys/{key}/actions","body":{"action":"force-open|force-closed|disable|reset"},"auth":"Authorization: Bearer <token>"},
{"method":"POST","path":"/api/v1/reload","auth":"Authorization: Bearer <token>"}
]}"#;

// --- Handling -----------------------------------------------------------------------------------

/// Who a request comes from, for the logs.
fn peer<B>(req: &Request<B>) -> String {
    req.extensions()
        .get::<PeerAddr>()
        .map_or_else(|| "unknown".to_owned(), |p| p.0.to_string())
}

async fn handle<B>(inner: Arc<Inner>, req: Request<B>) -> Response<Body>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    if let Some(name) = req.uri().query().and_then(auth::credential_in_query) {
        tracing::warn!(
            target: "breaker_admin",
            peer = %peer(&req),
            path = req.uri().path(),
            parameter = %name,
            "refused a request with a credential in its query string"
        );
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "query parameter `{name}` looks like a credential: credentials in a URL end up \
                 in logs and browser history, so they are refused; send `Authorization: Bearer \
                 <token>` instead"
            ),
        );
    }
    let segs = match segments(req.uri().path()) {
        Ok(s) => s,
        Err(PathError::Traversal(seg)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "path segment `{seg}` is refused: `.` and `..` (also percent-encoded) are not \
                     names"
                ),
            )
        }
        Err(PathError::Encoding(seg)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("path segment `{seg}` is not valid percent-encoded UTF-8"),
            )
        }
    };
    let Some(route) = Route::parse(&segs) else {
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "no route `{} {}`; the API's routes are listed at `GET /api/v1`",
                req.method(),
                req.uri().path()
            ),
        );
    };
    if !route.allows(req.method()) {
        let allow = if route.is_admin() {
            "POST"
        } else {
            "GET, HEAD"
        };
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "`{}` is not allowed on `{}`; allowed: {allow}",
                req.method(),
                req.uri().path()
            ),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
        return r;
    }
    if route.is_admin() {
        return admin(inner, req).await;
    }
    let query = match query_params(req.uri().query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    match route {
        Route::Index => asset("text/html; charset=utf-8", INDEX_HTML),
        Route::Js => asset("text/javascript; charset=utf-8", APP_JS),
        Route::Css => asset("text/css; charset=utf-8", APP_CSS),
        Route::Api => {
            let mut r = Response::new(full(API_INDEX));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            with_common_headers(r)
        }
        Route::List => list(&inner, &query),
        Route::One(id) => one(&inner, &id, &query),
        Route::Keys(id) => keys(&inner, &id, &query),
        Route::Key(id, key) => key_of(&inner, &id, &key),
        Route::Functions => json(StatusCode::OK, &catalog::functions()),
        Route::Events => events(&inner),
        Route::Act(..) | Route::Reload => unreachable!("admin routes are handled above"),
    }
}

/// Refuses parameters a route does not read, so a typo is not silently ignored.
fn known_params(query: &[(String, String)], known: &[&str]) -> Result<(), Refusal> {
    for (k, _) in query {
        if !known.contains(&k.as_str()) {
            let list = if known.is_empty() {
                "none".to_owned()
            } else {
                known
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(Refusal(
                StatusCode::BAD_REQUEST,
                format!("unknown query parameter `{k}`; this route reads {list}"),
            ));
        }
    }
    Ok(())
}

fn bool_param(query: &[(String, String)], name: &str) -> Result<bool, Refusal> {
    match query.iter().rev().find(|(k, _)| k == name) {
        None => Ok(false),
        Some((_, v)) => match v.as_str() {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(Refusal(
                StatusCode::BAD_REQUEST,
                format!("query parameter `{name}={other}`: expected `true` or `false`"),
            )),
        },
    }
}

#[derive(Serialize)]
struct ListBody {
    /// Milliseconds since the admin was built (its clock).
    now_ms: u64,
    sample_every_ms: u64,
    /// Whether admin actions are on.
    admin: bool,
    breakers: Vec<BreakerJson>,
}

fn row(inner: &Inner, item: &Item, history: bool) -> BreakerJson {
    let fleet = item.fleet.as_ref().map(|f| f.fleet_view());
    BreakerJson::of(item, inner.sampler.stats(item, history), fleet)
}

fn list(inner: &Inner, query: &[(String, String)]) -> Response<Body> {
    if let Err(r) = known_params(query, &["history"]) {
        return r.into();
    }
    let history = match bool_param(query, "history") {
        Ok(h) => h,
        Err(r) => return r.into(),
    };
    let items = inner.items();
    let breakers = items.iter().map(|i| row(inner, i, history)).collect();
    json(
        StatusCode::OK,
        &ListBody {
            now_ms: inner.now_ms(),
            sample_every_ms: inner.sampler.every.as_millis() as u64,
            admin: !matches!(inner.guard, Guard::Off),
            breakers,
        },
    )
}

/// The row `id`, or a 404 naming it.
fn find(inner: &Inner, id: &str) -> Result<Item, Refusal> {
    let items = inner.items();
    match items.into_iter().find(|i| i.id == id) {
        Some(i) => Ok(i),
        None => Err(Refusal(
            StatusCode::NOT_FOUND,
            format!("unknown breaker `{id}`; `GET /api/v1/breakers` lists them"),
        )),
    }
}

fn one(inner: &Inner, id: &str, query: &[(String, String)]) -> Response<Body> {
    if let Err(r) = known_params(query, &[]) {
        return r.into();
    }
    match find(inner, id) {
        Ok(item) => json(StatusCode::OK, &row(inner, &item, true)),
        Err(r) => r.into(),
    }
}

/// The largest page of keys.
const MAX_LIMIT: usize = 500;
/// The deepest a page may start: a page costs memory for `offset + limit` keys.
const MAX_OFFSET: usize = 10_000;

fn usize_param(
    query: &[(String, String)],
    name: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, Refusal> {
    let Some((_, v)) = query.iter().rev().find(|(k, _)| k == name) else {
        return Ok(default);
    };
    match v.parse::<usize>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(Refusal(
            StatusCode::BAD_REQUEST,
            format!(
                "query parameter `{name}={v}`: expected a whole number in {}..={}",
                range.start(),
                range.end()
            ),
        )),
    }
}

fn keyed(inner: &Inner, id: &str) -> Result<(Item, Arc<dyn catalog::Keys>), Refusal> {
    let item = find(inner, id)?;
    match item.keys.clone() {
        Some(k) => Ok((item, k)),
        None => Err(Refusal(
            StatusCode::NOT_FOUND,
            format!("breaker `{id}` has no keys: it is a single breaker, not a keyed group"),
        )),
    }
}

fn keys(inner: &Inner, id: &str, query: &[(String, String)]) -> Response<Body> {
    if let Err(r) = known_params(query, &["offset", "limit", "state"]) {
        return r.into();
    }
    let (offset, limit) = match (
        usize_param(query, "offset", 0, 0..=MAX_OFFSET),
        usize_param(query, "limit", 50, 1..=MAX_LIMIT),
    ) {
        (Ok(o), Ok(l)) => (o, l),
        (Err(r), _) | (_, Err(r)) => return r.into(),
    };
    let state = match query.iter().rev().find(|(k, _)| k == "state") {
        None => None,
        Some((_, v)) => match State::ALL.into_iter().find(|s| s.as_str() == v) {
            Some(s) => Some(s),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "query parameter `state={v}`: expected one of `closed`, `open`, \
                         `half-open`, `forced-open`, `forced-closed`"
                    ),
                )
            }
        },
    };
    match keyed(inner, id) {
        Ok((item, k)) => json(
            StatusCode::OK,
            &view::keys_page(&item.id, &*k, offset, limit, state),
        ),
        Err(r) => r.into(),
    }
}

fn unknown_key(id: &str, key: &str) -> Response<Body> {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "breaker `{id}` has no key `{key}` (keys are made by their first call, and idle \
             closed ones may have been evicted)"
        ),
    )
}

fn key_of(inner: &Inner, id: &str, key: &str) -> Response<Body> {
    let (_, k) = match keyed(inner, id) {
        Ok(x) => x,
        Err(r) => return r.into(),
    };
    match k.find(key) {
        Some(b) => json(
            StatusCode::OK,
            &view::KeyJson {
                key: key.to_owned(),
                state: view::StateJson::of(&b, &b.snapshot()),
                fleet: inner.sources().fleet_of(&b).map(|f| f.fleet_view()),
            },
        ),
        None => unknown_key(id, key),
    }
}

#[derive(Serialize)]
struct Hello {
    #[serde(rename = "type")]
    kind: &'static str,
    sample_every_ms: u64,
    buffer: &'static str,
    now_ms: u64,
}

fn events(inner: &Inner) -> Response<Body> {
    let hello = serde_json::to_string(&Hello {
        kind: "hello",
        sample_every_ms: inner.sampler.every.as_millis() as u64,
        buffer: "a reader that falls behind loses the oldest events and is told with a \
                 `dropped` event",
        now_ms: inner.now_ms(),
    })
    .expect("serialises");
    // `retry`: how long a browser's EventSource waits before reconnecting.
    let hello = Bytes::from(format!("retry: 2000\nevent: hello\ndata: {hello}\n\n"));
    match inner.bus.subscribe(hello) {
        Ok(stream) => {
            let mut r = Response::new(StreamBody::new(stream).boxed());
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            h.insert("x-accel-buffering", HeaderValue::from_static("no"));
            with_common_headers(r)
        }
        Err(crate::events::TooManyReaders(n)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many event-stream readers ({n} connected, the bound); try again later"),
        ),
    }
}

// --- Admin --------------------------------------------------------------------------------------

/// An admin request: guards, then the action.
async fn admin<B>(inner: Arc<Inner>, req: Request<B>) -> Response<Body>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let who_peer = peer(&req);
    let path = req.uri().path().to_owned();
    let refuse = |status: StatusCode, why: &str| {
        tracing::warn!(
            target: "breaker_admin",
            peer = %who_peer,
            path = %path,
            status = status.as_u16(),
            "refused an admin request: {why}"
        );
    };
    if matches!(inner.guard, Guard::Off) {
        let msg = "admin actions are off: the service was built without \
                   `AdminBuilder::admin_token` or `AdminBuilder::admin_layer`";
        refuse(StatusCode::FORBIDDEN, "admin actions are off");
        return error(StatusCode::FORBIDDEN, msg);
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        refuse(StatusCode::PAYLOAD_TOO_LARGE, "body too large");
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                refuse(StatusCode::PAYLOAD_TOO_LARGE, "body too large");
                return too_large();
            }
            return error(
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            );
        }
    };
    let mut req = Request::from_parts(parts, Full::new(bytes));
    match &inner.guard {
        Guard::Off => unreachable!("checked above"),
        Guard::Tokens(tokens) => match tokens.check(req.headers()) {
            Verdict::Allowed(name) => {
                req.extensions_mut().insert(Principal(name));
                act(inner, req).await
            }
            Verdict::Missing => {
                refuse(StatusCode::UNAUTHORIZED, "no bearer token");
                unauthorized(
                    "missing credentials: admin actions need `Authorization: Bearer <token>` \
                     (cookies are never read)",
                    "Bearer realm=\"breaker-admin\"",
                )
            }
            Verdict::NotBearer => {
                refuse(StatusCode::UNAUTHORIZED, "not a bearer token");
                unauthorized(
                    "the `Authorization` header is not `Bearer <token>`",
                    "Bearer realm=\"breaker-admin\", error=\"invalid_request\"",
                )
            }
            Verdict::Wrong => {
                refuse(StatusCode::UNAUTHORIZED, "wrong bearer token");
                unauthorized(
                    "the bearer token is not valid",
                    "Bearer realm=\"breaker-admin\", error=\"invalid_token\"",
                )
            }
        },
        Guard::Layer(service) => match service.clone().oneshot(req).await {
            Ok(r) => r,
            Err(e) => match e {},
        },
    }
}

fn too_large() -> Response<Body> {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is over {MAX_BODY_BYTES} bytes; an admin request is a small JSON object"),
    )
}

fn unauthorized(message: &str, challenge: &'static str) -> Response<Body> {
    let mut r = error(StatusCode::UNAUTHORIZED, message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    r
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionBody {
    action: String,
    /// Why, for the logs (at most 200 characters).
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Serialize)]
struct ActionDone<'a> {
    breaker: &'a str,
    key: Option<&'a str>,
    action: &'static str,
    /// The local breaker's state after the action.
    state: &'static str,
    who: &'a str,
    /// A shared breaker's: the fleet's view after the action (`null` for a local breaker).
    fleet: Option<serde_json::Value>,
}

/// Carries out an admin request that passed the guard (with a [`Principal`] when known).
pub(crate) async fn act(inner: Arc<Inner>, req: Request<Full<Bytes>>) -> Response<Body> {
    let who = req.extensions().get::<Principal>().map_or_else(
        || "(authenticated by the admin layer)".to_owned(),
        |p| p.0.clone(),
    );
    let peer = peer(&req);
    let segs = match segments(req.uri().path()) {
        Ok(s) => s,
        Err(_) => return error(StatusCode::BAD_REQUEST, "invalid path"),
    };
    let route = Route::parse(&segs);
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match req.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => match e {},
    };
    if !body.is_empty()
        && !content_type.as_deref().is_some_and(|c| {
            c.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        })
    {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body must be `application/json`, not `{}`",
                content_type.as_deref().unwrap_or("(no content type)")
            ),
        );
    }
    match route {
        Some(Route::Act(id, key)) => act_on(&inner, &id, key.as_deref(), &body, &who, &peer).await,
        Some(Route::Reload) => reload(&inner, &who, &peer),
        _ => error(
            StatusCode::NOT_FOUND,
            "not an admin route; the API's routes are listed at `GET /api/v1`",
        ),
    }
}

async fn act_on(
    inner: &Inner,
    id: &str,
    key: Option<&str>,
    body: &[u8],
    who: &str,
    peer: &str,
) -> Response<Body> {
    let actions = Action::ALL
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if body.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            format!("expected a JSON body `{{\"action\": ..}}` with one of {actions}"),
        );
    }
    let parsed: ActionBody = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "malformed body: {e}; expected `{{\"action\": ..}}` with one of {actions} and \
                     an optional `\"reason\"`"
                ),
            )
        }
    };
    let Some(action) = Action::from_name(&parsed.action) else {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown action `{}`; expected one of {actions}",
                parsed.action
            ),
        );
    };
    if parsed
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > 200)
    {
        return error(StatusCode::BAD_REQUEST, "`reason` is over 200 characters");
    }
    let item = match find(inner, id) {
        Ok(i) => i,
        Err(r) => return r.into(),
    };
    let breaker = match (key, &item.breaker, &item.keys) {
        (None, Some(b), _) => b.clone(),
        (None, None, Some(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "breaker `{id}` is a keyed group: act on one key, \
                     `POST /api/v1/breakers/{{id}}/keys/{{key}}/actions`"
                ),
            )
        }
        (Some(k), _, Some(keys)) => match keys.find(k) {
            Some(b) => b,
            None => return unknown_key(id, k),
        },
        (Some(_), _, None) => {
            return error(
                StatusCode::NOT_FOUND,
                format!("breaker `{id}` has no keys: it is a single breaker, not a keyed group"),
            )
        }
        (None, None, None) => {
            return error(StatusCode::NOT_FOUND, format!("unknown breaker `{id}`"))
        }
    };
    let before = breaker.state();
    // A shared breaker's action goes to the fleet (through its store); the local breaker
    // follows the fleet's decision.
    let shared = match key {
        None => item.fleet.clone(),
        // A key's breaker of a shared keyed group is shared on its own.
        Some(_) => inner.sources().fleet_of(&breaker),
    };
    let fleet = match shared {
        Some(f) => match f.act(action).await {
            Ok(view) => Some(view),
            Err(e) => {
                tracing::warn!(
                    target: "breaker_admin",
                    who,
                    peer,
                    action = action.as_str(),
                    breaker = id,
                    error = %e,
                    "admin action failed: the fleet's store did not carry it out; nothing changed"
                );
                return error(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "`{action}` on shared breaker `{id}` did not reach the fleet: {e}; nothing \
                         changed"
                    ),
                );
            }
        },
        _ => {
            action.apply(&breaker);
            None
        }
    };
    let after = breaker.state();
    tracing::warn!(
        target: "breaker_admin",
        who,
        peer,
        action = action.as_str(),
        breaker = id,
        key,
        fleet = fleet.is_some(),
        from = before.as_str(),
        to = after.as_str(),
        reason = parsed.reason.as_deref(),
        "admin action"
    );
    inner.publish_after_transitions(Event::Action {
        breaker: id.to_owned(),
        key: key.map(str::to_owned),
        action: action.as_str(),
        who: who.to_owned(),
        fleet: fleet.is_some(),
        at_ms: inner.now_ms(),
    });
    json(
        StatusCode::OK,
        &ActionDone {
            breaker: id,
            key,
            action: action.as_str(),
            state: after.as_str(),
            who,
            fleet,
        },
    )
}

#[derive(Serialize)]
struct Reloaded {
    file: Option<String>,
    generation: u64,
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<String>,
}

#[derive(Serialize)]
struct ReloadFailed {
    error: String,
    status: u16,
    file: Option<String>,
    errors: Vec<String>,
}

fn reload(inner: &Inner, who: &str, peer: &str) -> Response<Body> {
    let registries: Vec<_> = inner
        .sources()
        .all_registries()
        .into_iter()
        .filter(|r| r.source_file().is_some())
        .collect();
    if registries.is_empty() {
        tracing::warn!(target: "breaker_admin", who, peer, action = "reload", outcome = "nothing to reload", "admin action");
        return error(
            StatusCode::CONFLICT,
            "no policy registry loaded from a file: nothing to reload (install one with \
             `breaker::config::install`, or add it with `AdminBuilder::policies`)",
        );
    }
    let mut done = Vec::new();
    for r in registries {
        let file = r.source_file().map(|p| p.display().to_string());
        match r.reload() {
            Ok(report) => {
                tracing::warn!(
                    target: "breaker_admin",
                    who,
                    peer,
                    action = "reload",
                    file = file.as_deref(),
                    generation = r.generation(),
                    changed = ?report.changed,
                    "admin action"
                );
                inner.publish(Event::Reload {
                    ok: true,
                    generation: r.generation(),
                    changed: report.changed.clone(),
                    at_ms: inner.now_ms(),
                });
                done.push(Reloaded {
                    file,
                    generation: r.generation(),
                    added: report.added,
                    removed: report.removed,
                    changed: report.changed,
                });
            }
            Err(errors) => {
                tracing::warn!(
                    target: "breaker_admin",
                    who,
                    peer,
                    action = "reload",
                    file = file.as_deref(),
                    error = %errors,
                    "admin action failed: the previous policies stay in force"
                );
                inner.publish(Event::Reload {
                    ok: false,
                    generation: r.generation(),
                    changed: Vec::new(),
                    at_ms: inner.now_ms(),
                });
                return json(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &ReloadFailed {
                        error: format!(
                            "the config file has errors; the previous policies stay in force \
                             (registries before this one in the list were reloaded: {})",
                            done.len()
                        ),
                        status: 422,
                        file,
                        errors: errors.errors().iter().map(ToString::to_string).collect(),
                    },
                );
            }
        }
    }
    json(StatusCode::OK, &serde_json::json!({ "reloaded": done }))
}
