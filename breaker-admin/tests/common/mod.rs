//! Helpers of the integration tests: a real HTTP client, raw requests (for paths a URL parser
//! would normalise), and the process's resident memory.
#![allow(dead_code)]

use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A bounded wait: every wait in these tests ends by this deadline at the latest.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .unwrap()
}

/// GET `path`: the status and the body as JSON.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let r = client()
        .get(format!("http://{addr}{path}"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// POST a JSON body to `path`, with `Authorization: Bearer {token}` when given.
pub async fn post(addr: SocketAddr, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = client()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A response read off a raw connection.
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Raw {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// Sends `request` (a whole HTTP/1.1 request, `Connection: close`) as written, and reads the
/// response to its end.
pub async fn raw(addr: SocketAddr, request: &[u8]) -> Raw {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(DEADLINE, s.read_to_end(&mut out))
        .await
        .expect("the server answers")
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Raw {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// A GET of `path` as written.
pub async fn raw_get(addr: SocketAddr, path: &str) -> Raw {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
}

/// The server-sent events of one reader, parsed.
pub struct Events {
    stream:
        std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl Events {
    pub async fn connect(addr: SocketAddr) -> Events {
        let r = client()
            .get(format!("http://{addr}/api/v1/events"))
            .timeout(Duration::from_secs(3600))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        Events {
            stream: Box::pin(r.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next event: its name and its data, within the deadline.
    pub async fn next(&mut self) -> (String, Value) {
        use futures_util::StreamExt;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                return (name, serde_json::from_str(&data).unwrap());
            }
            let chunk = tokio::time::timeout(DEADLINE, self.stream.next())
                .await
                .expect("an event within the deadline")
                .expect("the stream goes on")
                .unwrap();
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The next event that is not a heartbeat, rejection count or keyed-group update.
    pub async fn next_of(&mut self, names: &[&str]) -> Value {
        loop {
            let (name, data) = self.next().await;
            if names.contains(&name.as_str()) {
                return data;
            }
        }
    }
}

/// The process's resident memory, in bytes (Linux).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// The `tracing` events of target `breaker_admin`, as `field=value` text.
pub fn logged() -> &'static Mutex<Vec<String>> {
    static LOGGED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    LOGGED.get_or_init(|| {
        struct Capture;
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                if event.metadata().target() != "breaker_admin" {
                    return;
                }
                struct Fields(String);
                impl tracing::field::Visit for Fields {
                    fn record_debug(
                        &mut self,
                        field: &tracing::field::Field,
                        value: &dyn std::fmt::Debug,
                    ) {
                        self.0.push_str(&format!("{}={value:?} ", field.name()));
                    }
                }
                let mut f = Fields(String::new());
                event.record(&mut f);
                logged().lock().unwrap().push(f.0);
            }
        }
        tracing::subscriber::set_global_default(tracing_subscriber::layer::SubscriberExt::with(
            tracing_subscriber::registry(),
            Capture,
        ))
        .unwrap();
        Mutex::new(Vec::new())
    })
}

/// Whether one `breaker_admin` event logged so far holds every part of `all`.
pub fn was_logged(all: &[&str]) -> bool {
    logged()
        .lock()
        .unwrap()
        .iter()
        .any(|line| all.iter().all(|part| line.contains(part)))
}
