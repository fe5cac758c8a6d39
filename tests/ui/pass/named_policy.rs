//! `policy = ".."` checked against a config file at compile time and, with no registry
//! installed, taken from that file (embedded) at run time.
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(policy = "inventory", config = "tests/fixtures/breaker.toml")]
async fn stock(sku: &str) -> Result<u32, MyError> {
    Ok(u32::try_from(sku.len()).unwrap_or(u32::MAX))
}

#[circuit_breaker(policy = "payments", config = "tests/fixtures/breaker.toml", key = tenant)]
async fn charge(tenant: String, cents: u64) -> Result<u64, MyError> {
    let _ = tenant;
    Ok(cents)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let n: Result<u32, breaker::Error<MyError>> = stock("abc").await;
        assert_eq!(n.unwrap(), 3);
        assert_eq!(charge("acme".into(), 250).await.unwrap(), 250);
    });
}
