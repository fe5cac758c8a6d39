//! The words of every policy string: tokens, whole numbers, percentages and durations, the
//! suggestions of "did you mean", and [`DslError`], the error that points at a fragment.
//!
//! A leaf: it knows no policy, so the grammars of [`crate::dsl`] (retry, breaker, bulkhead,
//! order), [`crate::scope`] and the config reader build on it without importing each other. A
//! grammar tells the [`Parser`] its keywords (a keyword after a number is the next clause, not
//! a misspelt unit). The public paths of what is public here are [`crate::dsl`]'s
//! ([`dsl::DslError`](crate::dsl::DslError), [`dsl::parse_duration`](crate::dsl::parse_duration),
//! [`dsl::format_duration`](crate::dsl::format_duration)).

mod error;
mod parse;

pub use error::DslError;
pub(crate) use error::{shown_span, suggest, suggest_key, tick};
pub(crate) use parse::{compact, fmt_duration, parse_duration, Parser, Token};
