//! A return type written through any alias of `Result` the compiler can see through: a
//! crate's own `Res<T>`, one in another module, `anyhow::Result<T>`; with retry and a
//! fallback, whose types the expansion names through the alias.
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

pub type Res<T> = Result<T, MyError>;

mod errors {
    pub type Fallible<T, E = super::MyError> = Result<T, E>;
}

#[circuit_breaker(threshold = 5)]
async fn plain() -> Res<u32> {
    Ok(1)
}

async fn cached(_: breaker::Error<MyError>) -> Result<u32, breaker::Error<MyError>> {
    Ok(0)
}

#[circuit_breaker(threshold = 5, retry = "2x", fallback = cached)]
async fn retried(fail: bool) -> errors::Fallible<u32> {
    if fail {
        Err(MyError)
    } else {
        Ok(2)
    }
}

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn with_anyhow(n: &str) -> anyhow::Result<u32> {
    Ok(n.parse()?)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let n: Result<u32, breaker::Error<MyError>> = plain().await;
        assert_eq!(n.unwrap(), 1);
        assert_eq!(retried(false).await.unwrap(), 2);
        assert_eq!(retried(true).await.unwrap(), 0);
        let n: Result<u32, breaker::Error<anyhow::Error>> = with_anyhow("3").await;
        assert_eq!(n.unwrap(), 3);
        assert!(with_anyhow("x").await.is_err());
    });
}
