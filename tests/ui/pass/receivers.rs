//! Every receiver form the compiler accepts, with retry where it can reuse the receiver.
//! Each retried method fails its first attempt, so the second attempt runs with a copy of
//! the receiver: a shared borrow is copied, an owned receiver (`self`, `Box<Self>`,
//! `Arc<Self>`, `Rc<Self>`, `Pin<Box<Self>>`) is cloned. Exclusive borrows (`&mut self`,
//! `Pin<&mut Self>`) work without retry (with retry they are refused, see
//! `tests/ui/fail/mut_self_with_retry.rs`).
#![deny(warnings)]
// `self: &Self` and friends are what this case is about: clippy's advice to shorten them
// is about the user's own spelling, with or without the attribute.
#![allow(clippy::needless_arbitrary_self_type)]

use breaker::circuit_breaker;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(Debug)]
pub struct Flaky;

/// A client whose attempts fail every other time (the counter is shared by its clones).
#[derive(Clone, Default)]
pub struct Client {
    base: u32,
    attempts: Arc<AtomicU32>,
}

impl Client {
    fn attempt(&self) -> Result<u32, Flaky> {
        if self.attempts.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
            Err(Flaky)
        } else {
            Ok(self.base)
        }
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn by_ref(&self) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn by_ref_named<'a>(&'a self, extra: &'a u32) -> Result<u32, Flaky> {
        Ok(self.attempt()? + extra)
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn typed_ref(self: &Self) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn typed_ref_named<'a>(self: &'a Self, extra: &'a u32) -> Result<u32, Flaky> {
        Ok(self.attempt()? + extra)
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn pinned_ref(self: Pin<&Self>) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn ref_to_arc(self: &Arc<Self>) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn by_value(self) -> Result<u32, Flaky> {
        self.attempt()
    }

    /// Each attempt changes its own copy: the retried call sees `base + 1`, not `base + 2`.
    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn by_mut_value(mut self) -> Result<u32, Flaky> {
        self.base += 1;
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn typed_value(self: Self) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn boxed(self: Box<Self>) -> Result<u32, Flaky> {
        self.attempt()
    }

    /// The shape `Arc<Self>` methods exist for: the future owns its receiver (`'static`).
    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn shared(self: Arc<Self>) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn counted(self: Rc<Self>) -> Result<u32, Flaky> {
        self.attempt()
    }

    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn pinned_box(self: Pin<Box<Self>>) -> Result<u32, Flaky> {
        self.attempt()
    }

    /// `self` used in a closure and a macro of the body is the attempt's copy too.
    #[circuit_breaker(threshold = 9, retry = "2x")]
    pub async fn in_closure(self: Arc<Self>) -> Result<String, Flaky> {
        let base = || self.base;
        let n = self.attempt()?;
        Ok(format!("{}-{}", base(), n + self.base))
    }

    #[circuit_breaker(threshold = 9)]
    pub async fn by_mut_ref(&mut self) -> Result<u32, Flaky> {
        self.base += 1;
        Ok(self.base)
    }

    #[circuit_breaker(threshold = 9)]
    pub async fn typed_mut_ref(self: &mut Self) -> Result<u32, Flaky> {
        self.base += 1;
        Ok(self.base)
    }

    #[circuit_breaker(threshold = 9)]
    pub async fn pinned_mut(self: Pin<&mut Self>) -> Result<u32, Flaky> {
        let this = self.get_mut();
        this.base += 1;
        Ok(this.base)
    }
}

fn client(base: u32) -> Client {
    Client {
        base,
        attempts: Arc::default(),
    }
}

/// Asserts that the call made two attempts (the first one failed).
fn retried(c: &Client) {
    assert_eq!(c.attempts.swap(0, Ordering::SeqCst), 2);
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = client(10);
        assert_eq!(c.by_ref().await.unwrap(), 10);
        retried(&c);
        assert_eq!(c.by_ref_named(&1).await.unwrap(), 11);
        retried(&c);
        assert_eq!(c.typed_ref().await.unwrap(), 10);
        retried(&c);
        assert_eq!(c.typed_ref_named(&2).await.unwrap(), 12);
        retried(&c);
        assert_eq!(Pin::new(&c).pinned_ref().await.unwrap(), 10);
        retried(&c);
        assert_eq!(Arc::new(c.clone()).ref_to_arc().await.unwrap(), 10);
        retried(&c);
        assert_eq!(c.clone().by_value().await.unwrap(), 10);
        retried(&c);
        assert_eq!(c.clone().by_mut_value().await.unwrap(), 11);
        retried(&c);
        assert_eq!(c.clone().typed_value().await.unwrap(), 10);
        retried(&c);
        assert_eq!(Box::new(c.clone()).boxed().await.unwrap(), 10);
        retried(&c);
        assert_eq!(Rc::new(c.clone()).counted().await.unwrap(), 10);
        retried(&c);
        assert_eq!(Box::pin(c.clone()).pinned_box().await.unwrap(), 10);
        retried(&c);
        // `'static` and `Send`: spawned on the multi-threaded runtime.
        let spawned = tokio::spawn(Arc::new(c.clone()).shared());
        assert_eq!(spawned.await.unwrap().unwrap(), 10);
        retried(&c);
        let spawned = tokio::spawn(Arc::new(c.clone()).in_closure());
        assert_eq!(spawned.await.unwrap().unwrap(), "10-20");
        retried(&c);
        assert_eq!(c.by_mut_ref().await.unwrap(), 11);
        assert_eq!(c.typed_mut_ref().await.unwrap(), 12);
        assert_eq!(Pin::new(&mut c).pinned_mut().await.unwrap(), 13);
    });
}
