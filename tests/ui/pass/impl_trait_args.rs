#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn total(
    items: impl IntoIterator<Item = u32> + Clone,
    scale: &impl Fn(u32) -> u32,
) -> Result<u32, MyError> {
    Ok(items.into_iter().map(scale).sum())
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let n = total(vec![1, 2, 3], &|x| x * 2).await.unwrap();
        assert_eq!(n, 12);
    });
}
