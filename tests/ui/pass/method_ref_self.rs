#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

pub struct Client {
    base: u32,
}

impl Client {
    #[circuit_breaker(threshold = 3, retry = "2x")]
    pub async fn fetch(&self, id: u32) -> Result<u32, MyError> {
        Ok(self.base + id)
    }

    #[circuit_breaker(threshold = 3)]
    pub async fn reset(&mut self) -> Result<(), MyError> {
        self.base = 0;
        Ok(())
    }

    #[circuit_breaker(threshold = 3)]
    pub async fn into_base(self) -> Result<u32, MyError> {
        Ok(self.base)
    }
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = Client { base: 10 };
        assert_eq!(c.fetch(1).await.unwrap(), 11);
        c.reset().await.unwrap();
        assert_eq!(c.into_base().await.unwrap(), 0);
    });
}
