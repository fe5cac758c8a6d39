//! A timeout longer than the cooldown (the attribute's probe wait) is accepted: a probe held
//! past the wait lets one more in, in the same half-open period, and its late result still
//! counts, so a slow dependency cannot keep the breaker half-open for ever (issue 26 item 4;
//! it was refused while a takeover ignored the held probe's result).
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 5, cooldown = "1s", timeout = "5s")]
pub async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(fetch()).unwrap(), 1);
}
