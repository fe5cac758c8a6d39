#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn parse(text: &str) -> Result<u32, std::num::ParseIntError> {
    if text.is_empty() {
        return Ok(0);
    }
    let n: u32 = text.parse()?;
    Ok(n)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(parse("").await.unwrap(), 0);
        assert_eq!(parse("5").await.unwrap(), 5);
        assert!(parse("x").await.is_err());
    });
}
