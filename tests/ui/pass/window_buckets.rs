//! A time window with its bucket count, written as in a config file.

use breaker::breaker::SlidingWindow;
use breaker::circuit_breaker;
use std::time::Duration;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(
    failure_rate = 50,
    window = "60s in 12 buckets",
    name = "window_buckets"
)]
async fn fetch(id: u32) -> Result<u32, MyError> {
    Ok(id)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(fetch(3).await.unwrap(), 3);
        let breaker = breaker::annotated::breaker("window_buckets").unwrap();
        assert_eq!(
            breaker.policy().window,
            SlidingWindow::Time {
                length: Duration::from_secs(60),
                buckets: 12
            }
        );
    });
}
