//! `flatten`: the function keeps its declared `Result<T, E>`, the pipeline's own errors
//! (a rejection, a timeout) converted into `E`, so `?` works in a caller returning `E` as
//! well; `anyhow::Error`, `Box<dyn Error + Send + Sync>` and an enum of one's own qualify.
#![deny(warnings)]

use breaker::circuit_breaker;
use std::convert::Infallible;

#[circuit_breaker(threshold = 3, retry = "2x", flatten)]
async fn parse(n: &str) -> anyhow::Result<u32> {
    Ok(n.parse()?)
}

async fn total(a: &str, b: &str) -> anyhow::Result<u32> {
    Ok(parse(a).await? + parse(b).await?)
}

#[circuit_breaker(threshold = 5, flatten)]
async fn boxed(fail: bool) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    if fail {
        Err("down".into())
    } else {
        Ok(1)
    }
}

#[derive(Debug)]
pub enum AppError {
    NotFound,
    Resilience(breaker::Error<Infallible>),
}

impl From<breaker::Error<Infallible>> for AppError {
    fn from(e: breaker::Error<Infallible>) -> Self {
        AppError::Resilience(e)
    }
}

#[circuit_breaker(threshold = 1, flatten = true)]
async fn find(id: u32) -> Result<u32, AppError> {
    if id == 0 {
        Err(AppError::NotFound)
    } else {
        Ok(id)
    }
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(total("1", "2").await.unwrap(), 3);
        // Retry gave up: the last attempt's own error.
        let err = total("x", "1").await.unwrap_err();
        assert!(
            err.downcast_ref::<std::num::ParseIntError>().is_some(),
            "{err}"
        );
        // The third failure opens the breaker: a rejection, as an `anyhow::Error` too.
        assert!(parse("x").await.is_err());
        let err = parse("1").await.unwrap_err();
        assert!(
            err.downcast_ref::<breaker::Error<Infallible>>().is_some(),
            "{err}"
        );
        assert_eq!(boxed(false).await.unwrap(), 1);
        assert!(matches!(find(0).await, Err(AppError::NotFound)));
        assert!(matches!(
            find(1).await,
            Err(AppError::Resilience(breaker::Error::Rejected(_)))
        ));
    });
}
