#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[circuit_breaker(threshold = 5, retry = "3x")]
async fn parse<T, E>(text: T) -> Result<u64, E>
where
    T: AsRef<str> + Clone,
    E: From<std::num::ParseIntError>,
{
    Ok(text.as_ref().parse::<u64>()?)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let n: Result<u64, breaker::Error<std::num::ParseIntError>> = parse("42").await;
        assert_eq!(n.unwrap(), 42);
    });
}
