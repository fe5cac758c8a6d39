#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn sum((a, b): (u32, u32), mut extra: Vec<u32>) -> Result<u32, MyError> {
    extra.push(a + b);
    Ok(extra.iter().sum())
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(sum((1, 2), vec![3]).await.unwrap(), 6);
    });
}
