#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

mod reexport {
    pub use breaker as resilience;
}

#[circuit_breaker(threshold = 5, crate = reexport::resilience)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(threshold = 5, crate = "self::reexport::resilience")]
async fn fetch2() -> Result<u32, MyError> {
    Ok(2)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(fetch().await.unwrap(), 1);
        assert_eq!(fetch2().await.unwrap(), 2);
    });
}
