#![deny(warnings)]
// This case is about `async fn` in a public trait: the lint says the future has no `Send`
// bound, which is the trait author's choice, with or without the attribute.
#![allow(async_fn_in_trait)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

pub trait Store {
    /// The trait declares what the rewritten function returns.
    async fn get(&self, key: u32) -> Result<u32, breaker::Error<MyError>>;

    #[circuit_breaker(threshold = 5)]
    async fn default_get(&self, key: u32) -> Result<u32, MyError> {
        Ok(key)
    }
}

pub struct Memory;

impl Store for Memory {
    #[circuit_breaker(threshold = 5, retry = "2x")]
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
        assert_eq!(Memory.get(1).await.unwrap(), 2);
        assert_eq!(Memory.default_get(1).await.unwrap(), 1);
    });
}
