//! Attributes on arguments reach every binding the expansion makes of them: a `#[cfg]`-
//! disabled argument is gone everywhere, alternative `#[cfg]` arguments of one name each
//! keep their own, and `#[allow(..)]` still silences its lint. With and without retry,
//! under `deny(warnings)` (and clippy's `redundant_locals`, see tests/ui/clippy.rs).
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct Down;

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn disabled(
    #[cfg(target_pointer_width = "16")] never: u32,
    #[cfg(not(target_pointer_width = "16"))] always: u32,
) -> Result<u32, Down> {
    Ok(always)
}

#[circuit_breaker(threshold = 5)]
async fn disabled_once(
    #[cfg(target_pointer_width = "16")] never: u32,
    #[cfg(not(target_pointer_width = "16"))] always: u32,
) -> Result<u32, Down> {
    Ok(always)
}

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn alternatives(
    #[cfg(target_pointer_width = "64")] n: u32,
    #[cfg(not(target_pointer_width = "64"))] n: u32,
) -> Result<u32, Down> {
    Ok(n)
}

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn allowed(#[allow(unused_variables)] unused: u32, used: u32) -> Result<u32, Down> {
    Ok(used)
}

#[circuit_breaker(threshold = 5)]
async fn allowed_once(#[allow(unused_variables)] unused: u32, used: u32) -> Result<u32, Down> {
    Ok(used)
}

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn allowed_pattern(
    #[allow(unused_variables)] (a, b): (u32, u32),
    #[cfg(not(target_pointer_width = "16"))] mut total: u32,
) -> Result<u32, Down> {
    total += a;
    Ok(total)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(disabled(1).await.unwrap(), 1);
        assert_eq!(disabled_once(2).await.unwrap(), 2);
        assert_eq!(alternatives(3).await.unwrap(), 3);
        assert_eq!(allowed(0, 4).await.unwrap(), 4);
        assert_eq!(allowed_once(0, 5).await.unwrap(), 5);
        assert_eq!(allowed_pattern((1, 2), 3).await.unwrap(), 4);
    });
}
