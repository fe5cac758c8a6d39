#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[circuit_breaker(threshold = 1, key = host)]
async fn get(host: &str, fail: bool) -> Result<u32, MyError> {
    if fail {
        Err(MyError)
    } else {
        Ok(1)
    }
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(get("a", true).await.is_err());
        assert!(matches!(
            get("a", false).await,
            Err(breaker::Error::Rejected(_))
        ));
        assert_eq!(get("b", false).await.unwrap(), 1);
    });
}
