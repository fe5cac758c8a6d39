#![deny(warnings)]

//! `scope = "shared"` and `scope = "quorum(k)"` compile (the scope's syntax is checked at
//! compile time); with no store installed, the first call is a clear panic, never a breaker
//! that silently stays local.

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 3, scope = "shared")]
async fn shared() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(threshold = 3, scope = "quorum(3)", key = host)]
async fn quorum(host: &str) -> Result<u32, MyError> {
    let _ = host;
    Ok(2)
}

#[circuit_breaker(threshold = 3, scope = "local")]
async fn local() -> Result<u32, MyError> {
    Ok(3)
}

fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(f).expect_err("a shared scope without a store panics");
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => (*p.downcast::<&str>().expect("a string panic")).to_owned(),
    }
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(local()).unwrap(), 3);
    std::panic::set_hook(Box::new(|_| {}));
    let message = panic_message(|| {
        let _ = rt.block_on(shared());
    });
    let name = concat!(module_path!(), "::shared");
    assert_eq!(
        message,
        format!(
            "#[circuit_breaker]: breaker `{name}` has scope `shared` but no store is \
             installed: connect one (`breaker_redis::Store::connect`) and install it \
             (`breaker_redis::install`) before its first call, or give it scope `local`"
        )
    );
    // Not a local breaker after the panic: the next call panics again.
    let again = panic_message(|| {
        let _ = rt.block_on(shared());
    });
    assert_eq!(again, message);
    let message = panic_message(|| {
        let _ = rt.block_on(quorum("a"));
    });
    assert!(
        message.contains("has scope `quorum(3)` but no store is installed"),
        "{message}"
    );
    let _ = std::panic::take_hook();
}
