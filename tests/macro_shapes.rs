//! The function shapes of `tests/ui/pass` at run time on the multi-threaded runtime, through
//! `tokio::spawn` (so every future is `Send` and, where it owns its arguments, `'static`): an
//! owned receiver cloned for each attempt, a boxed future whose prepared locals each attempt
//! copies, `impl Trait` in the return type, attributes on arguments, an anyhow function
//! calling another with `?`, and every attempt running the body again with fresh copies.

use breaker::circuit_breaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(Debug, PartialEq)]
struct Flaky;

/// Fails the first `fail` attempts it sees, then succeeds.
#[derive(Clone, Default)]
struct Service {
    attempts: Arc<AtomicU32>,
    fail: u32,
    base: u32,
}

impl Service {
    fn attempt(&self) -> Result<u32, Flaky> {
        if self.attempts.fetch_add(1, Ordering::SeqCst) < self.fail {
            Err(Flaky)
        } else {
            Ok(self.base)
        }
    }

    /// Each attempt gets its own clone of the `Arc`, and so of nothing else.
    #[circuit_breaker(threshold = 9, retry = "3x", timeout = "1s")]
    async fn shared(self: Arc<Self>) -> Result<u32, Flaky> {
        tokio::task::yield_now().await;
        self.attempt()
    }

    /// Each attempt changes its own copy of `self`.
    #[circuit_breaker(threshold = 9, retry = "3x")]
    async fn owned(mut self) -> Result<u32, Flaky> {
        self.base += 1;
        tokio::task::yield_now().await;
        self.attempt()
    }

    /// A `'static` boxed future from `&self`: the locals are prepared once, copied per attempt.
    #[circuit_breaker(threshold = 9, retry = "3x")]
    #[allow(clippy::type_complexity)]
    fn boxed(&self, suffix: String) -> Pin<Box<dyn Future<Output = Result<String, Flaky>> + Send>> {
        let this = self.clone();
        let mut label = format!("{}-", self.base);
        Box::pin(async move {
            label.push_str(&suffix);
            tokio::task::yield_now().await;
            this.attempt()?;
            Ok(label)
        })
    }
}

#[circuit_breaker(threshold = 9, retry = "3x")]
async fn evens(n: u32, svc: Service) -> Result<impl Iterator<Item = u32> + Send, Flaky> {
    svc.attempt()?;
    Ok((0..n).filter(|x| x % 2 == 0))
}

#[circuit_breaker(threshold = 9, retry = "3x")]
async fn configured(
    #[cfg(target_pointer_width = "16")] never: u32,
    #[cfg(not(target_pointer_width = "16"))] n: u32,
    svc: Service,
) -> Result<u32, Flaky> {
    Ok(svc.attempt()? + n)
}

fn service(fail: u32) -> Service {
    Service {
        attempts: Arc::default(),
        fail,
        base: 10,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_receiver_is_cloned_for_each_attempt() {
    let svc = Arc::new(service(2));
    let n = tokio::spawn(Arc::clone(&svc).shared()).await.unwrap();
    assert_eq!(n.unwrap(), 10);
    assert_eq!(svc.attempts.load(Ordering::SeqCst), 3);

    let svc = service(2);
    let counter = Arc::clone(&svc.attempts);
    // base + 1, not base + 3: every attempt starts from the caller's value.
    assert_eq!(tokio::spawn(svc.owned()).await.unwrap().unwrap(), 11);
    assert_eq!(counter.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boxed_future_copies_its_prepared_locals_for_each_attempt() {
    let svc = service(2);
    let label = tokio::spawn(svc.boxed("x".into())).await.unwrap();
    // The `mut` local was pushed to once per attempt, each time on a fresh copy.
    assert_eq!(label.unwrap(), "10-x");
    assert_eq!(svc.attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impl_trait_returns_and_argument_attributes_run_on_spawned_tasks() {
    let svc = service(1);
    let sum = tokio::spawn(async move { evens(5, svc).await.map(Iterator::sum::<u32>) });
    assert_eq!(sum.await.unwrap().unwrap(), 6);
    let svc = service(2);
    let attempts = Arc::clone(&svc.attempts);
    assert_eq!(tokio::spawn(configured(1, svc)).await.unwrap().unwrap(), 11);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[circuit_breaker(threshold = 9, retry = "2x", flatten)]
async fn parse(text: String) -> anyhow::Result<u32> {
    Ok(text.trim().parse()?)
}

async fn sum(a: &str, b: &str) -> anyhow::Result<u32> {
    Ok(parse(a.into()).await? + parse(b.into()).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anyhow_function_calls_another_with_the_question_mark() {
    assert_eq!(tokio::spawn(sum(" 1", "2 ")).await.unwrap().unwrap(), 3);
    let err = tokio::spawn(sum("1", "x")).await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "invalid digit found in string");
}

#[derive(Debug)]
struct Down;

#[circuit_breaker(threshold = 1, retry = "2x")]
async fn always_down() -> Result<(), Down> {
    Err(Down)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_inner_makes_any_error_type_fit() {
    // Without `flatten`: the pipeline's error, its inner error mapped for the caller.
    let err: breaker::Error<String> = always_down()
        .await
        .unwrap_err()
        .map_inner(|d| format!("{d:?}"));
    assert!(matches!(err, breaker::Error::Rejected(_)), "{err:?}");
    let err: breaker::Error<String> = breaker::Error::Inner(Down).map_inner(|d| format!("{d:?}"));
    assert_eq!(err.inner().map(String::as_str), Some("Down"));
}
