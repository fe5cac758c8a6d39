#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

/// Fetches a stock level.
#[circuit_breaker(
    threshold = 5,
    cooldown = "30s",
    retry = "3x exp jitter",
    timeout = "2s"
)]
#[inline]
pub async fn get_stock(sku: &str, warehouse: String) -> Result<u32, MyError> {
    let _ = warehouse;
    Ok(u32::try_from(sku.len()).unwrap_or(u32::MAX))
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let n: Result<u32, breaker::Error<MyError>> = get_stock("abc", "w1".into()).await;
        assert_eq!(n.unwrap(), 3);
    });
}
