#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[circuit_breaker(threshold = 5)]
async fn read() -> std::io::Result<u32> {
    Ok(7)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let n: Result<u32, breaker::Error<std::io::Error>> = read().await;
        assert_eq!(n.unwrap(), 7);
    });
}
