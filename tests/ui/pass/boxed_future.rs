//! Functions returning a boxed future (the hand-written `async-trait` shape), with locals
//! prepared before `Box::pin(async move { .. })`. The statements before `Box::pin` run once,
//! when the function is called; with retry, each attempt's future gets its own copy of the
//! arguments and locals it captures. A `'static` future from `&self` stays `'static`.
#![deny(warnings)]

use breaker::circuit_breaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(Debug)]
pub struct Down;

pub struct Client {
    base: String,
    attempts: Arc<AtomicU32>,
}

/// Fails every other attempt.
fn flaky(attempts: &AtomicU32) -> Result<(), Down> {
    if attempts.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
        Err(Down)
    } else {
        Ok(())
    }
}

impl Client {
    /// Locals prepared from `&self`, so the future does not borrow `self`.
    #[circuit_breaker(threshold = 9, retry = "2x")]
    #[allow(clippy::type_complexity)]
    pub fn url(
        &self,
        id: u32,
    ) -> Pin<Box<dyn Future<Output = Result<String, Down>> + Send + 'static>> {
        let url = format!("{}/items/{id}", self.base);
        let attempts = Arc::clone(&self.attempts);
        Box::pin(async move {
            flaky(&attempts)?;
            Ok(url)
        })
    }

    /// A `mut` local the block changes: each attempt changes its own copy.
    #[circuit_breaker(threshold = 9, retry = "2x")]
    #[allow(clippy::type_complexity)]
    pub fn path(
        &self,
        parts: Vec<String>,
    ) -> Pin<Box<dyn Future<Output = Result<String, Down>> + Send + '_>> {
        let mut path = self.base.clone();
        Box::pin(async move {
            for p in &parts {
                path.push('/');
                path.push_str(p);
            }
            flaky(&self.attempts)?;
            Ok(path)
        })
    }

    /// Without retry the block runs once and may move what it likes.
    #[circuit_breaker(threshold = 9)]
    #[allow(clippy::type_complexity)]
    pub fn once(&self, id: u32) -> Pin<Box<dyn Future<Output = Result<String, Down>> + Send + '_>> {
        let owned = NotClone(id);
        Box::pin(async move { Ok(format!("{}:{}", self.base, owned.0)) })
    }
}

/// Moved into the one attempt a function without retry makes.
pub struct NotClone(u32);

/// A free function, a pattern argument, and no statements before `Box::pin`.
#[circuit_breaker(threshold = 9, retry = "2x")]
fn sum(
    (a, b): (u32, u32),
    attempts: Arc<AtomicU32>,
) -> Pin<Box<dyn Future<Output = Result<u32, Down>> + Send>> {
    Box::pin(async move {
        flaky(&attempts)?;
        Ok(a + b)
    })
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = Client {
            base: "http://h".into(),
            attempts: Arc::default(),
        };
        // `'static` and `Send`: spawned.
        let url = tokio::spawn(c.url(7)).await.unwrap().unwrap();
        assert_eq!(url, "http://h/items/7");
        assert_eq!(c.attempts.swap(0, Ordering::SeqCst), 2);
        let path = c.path(vec!["a".into(), "b".into()]).await.unwrap();
        assert_eq!(path, "http://h/a/b");
        assert_eq!(c.attempts.swap(0, Ordering::SeqCst), 2);
        assert_eq!(c.once(3).await.unwrap(), "http://h:3");
        let attempts = Arc::new(AtomicU32::new(0));
        assert_eq!(sum((1, 2), Arc::clone(&attempts)).await.unwrap(), 3);
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
    });
}
