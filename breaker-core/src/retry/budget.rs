//! A retry budget: a token bucket that caps how much retries can amplify an outage.
//!
//! Why: a retry policy of "3 attempts" turns one failing call into three. When a dependency is
//! down, every client multiplying its load by three keeps it down. A budget ties retries to
//! the ratio of failures to successes, so that retries stop when most calls fail and resume as
//! calls succeed again.
//!
//! How: this is gRPC's retry throttling (gRFC A6, "Retry Throttling",
//! <https://github.com/grpc/proposal/blob/master/A6-client-retries.md#throttling-retry-attempts-and-hedged-rpcs>),
//! the same idea as Finagle's `RetryBudget`. The bucket holds up to `max_tokens` tokens and
//! starts full. Every attempt that fails with a *transient* error takes one token (not below
//! zero); every successful attempt gives back `token_ratio` tokens (not above `max_tokens`). A
//! retry is allowed only while the bucket holds **more than half** of `max_tokens`. With the
//! gRPC defaults of `max_tokens = 10`, `token_ratio = 0.1`, retries stop after roughly five
//! more failures than ten times the successes, and in steady state retries stay below about
//! 10% of calls.
//!
//! Tokens are kept in thousandths (as gRPC specifies three decimal places for the ratio), in one
//! atomic integer; clones share the bucket, so one budget can cover several pipelines.

use crate::sync::{AtomicU64, Ordering};
use std::fmt;
use std::sync::Arc;

/// The scale of the fixed-point token count: 1 token = 1000 units.
const SCALE: u64 = 1000;

/// A shared retry budget (token bucket). See the [module docs](crate::retry). Cloning is cheap and
/// clones share the bucket.
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    /// Current tokens, in thousandths.
    milli: AtomicU64,
    /// `max_tokens * SCALE`.
    max: u64,
    /// `token_ratio * SCALE`, rounded.
    ratio: u64,
}

/// An invalid retry-budget setting.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// `max_tokens` out of range.
    #[error("retry budget `max_tokens` ({0}) must be in 1..=1000")]
    MaxTokens(u32),
    /// `token_ratio` out of range.
    #[error("retry budget `token_ratio` ({0}) must be in (0, 1] with at most 3 decimals")]
    TokenRatio(f64),
}

impl RetryBudget {
    /// gRPC's defaults: 10 tokens, 0.1 token back per success.
    pub const DEFAULT_MAX_TOKENS: u32 = 10;
    /// gRPC's default token ratio.
    pub const DEFAULT_TOKEN_RATIO: f64 = 0.1;

    /// A full bucket of `max_tokens` tokens (range `1..=1000`) that gains `token_ratio` tokens
    /// per success (range `(0, 1]`, rounded to thousandths; a ratio that rounds to zero is
    /// rejected).
    ///
    /// # Errors
    /// [`BudgetError`] if a value is out of range (NaN included).
    pub fn new(max_tokens: u32, token_ratio: f64) -> Result<Self, BudgetError> {
        if !(1..=1000).contains(&max_tokens) {
            return Err(BudgetError::MaxTokens(max_tokens));
        }
        let ratio = (token_ratio * SCALE as f64).round();
        if !(token_ratio > 0.0 && token_ratio <= 1.0 && ratio >= 1.0) {
            return Err(BudgetError::TokenRatio(token_ratio));
        }
        let max = u64::from(max_tokens) * SCALE;
        Ok(RetryBudget {
            inner: Arc::new(Inner {
                milli: AtomicU64::new(max),
                max,
                ratio: ratio as u64,
            }),
        })
    }

    /// Records a successful attempt: gives back `token_ratio` tokens, up to `max_tokens`.
    #[inline]
    pub fn deposit(&self) {
        let i = &*self.inner;
        // Fast path: a full bucket stays full (a plain load, no write, on the hot path).
        if i.milli.load(Ordering::Relaxed) >= i.max {
            return;
        }
        let _ = i
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(i.ratio).min(i.max))
            });
    }

    /// Records an attempt that failed with a transient error: takes one token, not below zero.
    pub fn withdraw(&self) {
        let _ = self
            .inner
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(SCALE))
            });
    }

    /// Whether a retry is allowed now: the bucket holds more than half of `max_tokens`.
    pub fn can_retry(&self) -> bool {
        self.inner.milli.load(Ordering::Relaxed) > self.inner.max / 2
    }

    /// The tokens in the bucket now (thousandths are kept, so this may be fractional).
    pub fn tokens(&self) -> f64 {
        self.inner.milli.load(Ordering::Relaxed) as f64 / SCALE as f64
    }
}

impl Default for RetryBudget {
    /// gRPC's defaults: 10 tokens, 0.1 per success.
    fn default() -> Self {
        RetryBudget::new(Self::DEFAULT_MAX_TOKENS, Self::DEFAULT_TOKEN_RATIO)
            .expect("the defaults are valid")
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("tokens", &self.tokens())
            .field("max_tokens", &(self.inner.max / SCALE))
            .field("token_ratio", &(self.inner.ratio as f64 / SCALE as f64))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_throttling_arithmetic() {
        let b = RetryBudget::new(10, 0.1).unwrap();
        assert!(b.can_retry());
        for _ in 0..4 {
            b.withdraw();
        }
        assert_eq!(b.tokens(), 6.0);
        assert!(b.can_retry());
        b.withdraw();
        assert_eq!(b.tokens(), 5.0);
        assert!(!b.can_retry(), "5 is not more than half of 10");
        b.deposit();
        assert_eq!(b.tokens(), 5.1);
        assert!(b.can_retry());
        for _ in 0..100 {
            b.withdraw();
        }
        assert_eq!(b.tokens(), 0.0);
        for _ in 0..1000 {
            b.deposit();
        }
        assert_eq!(b.tokens(), 10.0);
    }

    #[test]
    fn invalid_settings() {
        assert_eq!(
            RetryBudget::new(0, 0.1).unwrap_err(),
            BudgetError::MaxTokens(0)
        );
        assert!(RetryBudget::new(10, 0.0).is_err());
        assert!(RetryBudget::new(10, 0.0004).is_err());
        assert!(RetryBudget::new(10, f64::NAN).is_err());
        assert!(RetryBudget::new(10, 1.5).is_err());
    }
}
