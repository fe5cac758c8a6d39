//! The link-time list of annotated functions: every `#[circuit_breaker]` function adds one
//! [`Registered`] entry with `linkme`, so the program knows them all before any is called,
//! to check an installed registry against them ([`crate::config::install`]) and to list them
//! ([`crate::annotated::functions`]). The expansion names them through `__private`.

/// One `#[circuit_breaker]` function, as the macro registers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The function's name: its `name = ".."`, else its module path and name.
    pub function: &'static str,
    /// Its `policy = ".."`, if it names one.
    pub policy: Option<&'static str>,
    /// Its `config = ".."`, if it embeds a file.
    pub config: Option<&'static str>,
    /// Whether it has `key = ..` (a breaker per key).
    pub keyed: bool,
}

/// Every annotated function of the program, gathered at link time.
#[linkme::distributed_slice]
pub static REGISTERED: [Registered];
