#![deny(warnings)]

//! A named policy of scope `shared` from an embedded config file compiles; with no store
//! installed, the first call is a clear panic, never a breaker that silently stays local.

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(policy = "search", config = "tests/fixtures/shared.toml")]
async fn search() -> Result<u32, MyError> {
    Ok(1)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    std::panic::set_hook(Box::new(|_| {}));
    let payload = std::panic::catch_unwind(|| {
        let _ = rt.block_on(search());
    })
    .expect_err("a shared scope without a store panics");
    let _ = std::panic::take_hook();
    let message = payload.downcast::<String>().map(|s| *s).unwrap_or_default();
    assert!(
        message.contains("has scope `shared` but no store is installed"),
        "{message}"
    );
}
