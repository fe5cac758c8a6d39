//! `impl Trait` in the return type, with and without retry, with a captured lifetime, nested
//! in another type, and as the error type: the expansion never writes the type where the
//! compiler cannot accept it (a `let` annotation, a turbofish).
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct Down;

#[circuit_breaker(threshold = 5)]
async fn evens(n: u32) -> Result<impl Iterator<Item = u32>, Down> {
    Ok((0..n).filter(|x| x % 2 == 0))
}

#[circuit_breaker(threshold = 5, retry = "2x", timeout = "1s")]
async fn evens_retried(n: u32) -> Result<impl Iterator<Item = u32> + Send, Down> {
    Ok((0..n).filter(|x| x % 2 == 0))
}

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn scaler(by: u32) -> Result<Box<impl Fn(u32) -> u32>, Down> {
    Ok(Box::new(move |x| x * by))
}

#[circuit_breaker(threshold = 5, retry = "2x")]
async fn opaque_error(fail: bool) -> Result<u32, impl std::fmt::Debug> {
    if fail {
        Err(Down)
    } else {
        Ok(1)
    }
}

pub struct Words(Vec<String>);

impl Words {
    #[circuit_breaker(threshold = 5)]
    pub async fn words(&self) -> Result<impl Iterator<Item = &str> + '_, Down> {
        Ok(self.0.iter().map(String::as_str))
    }

    #[circuit_breaker(threshold = 5, retry = "2x")]
    pub async fn longer_than(&self, n: usize) -> Result<impl Iterator<Item = &String>, Down> {
        Ok(self.0.iter().filter(move |w| w.len() > n))
    }
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(evens(5).await.unwrap().collect::<Vec<_>>(), [0, 2, 4]);
        assert_eq!(evens_retried(3).await.unwrap().sum::<u32>(), 2);
        assert_eq!(scaler(3).await.unwrap()(2), 6);
        assert_eq!(opaque_error(false).await.unwrap(), 1);
        assert!(matches!(
            opaque_error(true).await,
            Err(breaker::Error::GaveUp { attempts: 2, .. })
        ));
        let words = Words(vec!["a".into(), "bcd".into()]);
        assert_eq!(
            words.words().await.unwrap().collect::<Vec<_>>(),
            ["a", "bcd"]
        );
        assert_eq!(words.longer_than(1).await.unwrap().count(), 1);
    });
}
