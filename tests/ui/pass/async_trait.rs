#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[async_trait::async_trait]
pub trait Store {
    async fn get(&self, key: u32) -> Result<u32, breaker::Error<MyError>>;
}

pub struct Memory;

#[async_trait::async_trait]
impl Store for Memory {
    /// Docs are kept.
    #[circuit_breaker(threshold = 5, retry = "2x", timeout = "1s")]
    async fn get(&self, key: u32) -> Result<u32, MyError> {
        Ok(key + 1)
    }
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let store: Box<dyn Store> = Box::new(Memory);
        assert_eq!(store.get(1).await.unwrap(), 2);
    });
}
