//! The demo's dashboard: `breaker-admin` serving the status API, the event stream and the
//! live dashboard on loopback while the demo runs, with admin actions behind a token made for
//! this run. Kept apart from `demo.rs`: the demo calls `start`, `show` and `recorder` only.

use breaker::record::Recorder;
use breaker::Pipeline;
use breaker_admin::{Admin, Listening};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

static ADMIN: OnceLock<Admin> = OnceLock::new();

/// A token for this run: 128 random bits from the standard library's per-process random keys.
fn token() -> String {
    let mut out = String::new();
    for i in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// Serves the dashboard on 127.0.0.1 (a free port) and prints its URL and the admin token.
/// The annotated function's breaker shows once it is built (the warm-up call).
pub(crate) async fn start() -> std::io::Result<Listening> {
    let token = token();
    let admin = Admin::builder()
        .admin_token("demo operator", &token)
        .build();
    let listening = admin.listen().await?;
    println!(
        "dashboard: {} (open it now to watch the outage live; admin token {token})",
        listening.url()
    );
    let _ = ADMIN.set(admin);
    Ok(listening)
}

/// Shows the breaker of a pipeline built with the plain API (`--config`).
pub(crate) fn show(name: &str, pipeline: &Pipeline) {
    if let Some(admin) = ADMIN.get() {
        admin.add_pipeline(name, pipeline);
    }
}

/// The recorder of the breaker's client set: `file`'s (a `--record` trace) followed by the
/// dashboard's latency percentiles of breaker `name`.
pub(crate) fn recorder(name: &str, file: Option<Recorder>) -> Option<Recorder> {
    let latency = ADMIN.get().map(|a| a.recorder(name));
    match (file, latency) {
        (Some(f), Some(l)) => Some(f.tee(l)),
        (f, l) => f.or(l),
    }
}
