//! Who may act: bearer tokens compared in constant time, or the user's own tower layer.
//!
//! # Why a bearer header and never a cookie
//! A browser attaches cookies to every request to their site, including one a hostile page
//! makes (a form posted cross-site): with cookies, any page an operator visits could force a
//! breaker open. An `Authorization` header is sent only by code that holds the token, and a
//! cross-site script cannot set it without a CORS preflight, which this service never
//! answers. So admin actions read the `Authorization: Bearer` header alone: a request that
//! carries only cookies is refused like one that carries nothing.
//!
//! # Why the token never rides in a query string
//! URLs end up in access logs, proxies' logs, browser history and `Referer` headers. A request
//! with a token-like query parameter (`token`, `access_token`, ...) is refused with 400 on every
//! route, whether or not the token is valid, so nobody gets used to sending it that way.
//!
//! # Constant time
//! Both the presented token and each configured one are hashed with SHA-256 and the digests
//! compared with [`subtle`]'s constant-time equality, against every configured token without
//! stopping at a match: the time taken says nothing about how much of a token was right, nor
//! about its length.

use http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Who made an admin request, as its `tracing` event and the `action` event name them: the
/// name of the token that authenticated it, or what a user-supplied auth layer put in the
/// request's extensions.
///
/// A tower auth layer given to
/// [`AdminBuilder::admin_layer`](crate::AdminBuilder::admin_layer) names the caller by
/// inserting a `Principal` into the request's extensions (`req.extensions_mut().insert(..)`);
/// without one, actions are logged as `"(authenticated by the admin layer)"`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

/// Query parameters that look like credentials; refused on every route.
pub(crate) const CREDENTIAL_PARAMS: &[&str] = &[
    "token",
    "access_token",
    "bearer",
    "bearer_token",
    "auth",
    "authorization",
    "api_key",
    "apikey",
    "password",
];

/// The configured tokens.
#[derive(Clone, Default)]
pub(crate) struct Tokens(Vec<(String, [u8; 32])>);

/// What the `Authorization` header says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A configured token: its name.
    Allowed(String),
    /// No `Authorization` header.
    Missing,
    /// A header that is not `Bearer <token>`.
    NotBearer,
    /// A bearer token that matches none.
    Wrong,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl Tokens {
    pub(crate) fn add(&mut self, name: String, token: &str) {
        self.0.push((name, digest(token.as_bytes())));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Judges a request's headers. Cookies are never read.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Verdict {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Verdict::Missing;
        };
        let value = value.as_bytes();
        // The scheme is case-insensitive (RFC 9110 11.1); one space, then the token.
        let Some(token) = value
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case(b"bearer "))
            .map(|_| &value[7..])
        else {
            return Verdict::NotBearer;
        };
        let token = token.trim_ascii();
        if token.is_empty() {
            return Verdict::NotBearer;
        }
        let presented = digest(token);
        let mut found: Option<&str> = None;
        for (name, d) in &self.0 {
            // No early exit: every configured token is compared.
            let equal: bool = presented.ct_eq(d).into();
            if equal && found.is_none() {
                found = Some(name);
            }
        }
        match found {
            Some(name) => Verdict::Allowed(name.to_owned()),
            None => Verdict::Wrong,
        }
    }
}

/// The name of the first credential-like query parameter of `query`, if any.
pub(crate) fn credential_in_query(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let name = pair.split('=').next().unwrap_or("");
        let name = crate::service::percent_decode(name).unwrap_or_else(|| name.to_owned());
        CREDENTIAL_PARAMS
            .iter()
            .any(|c| c.eq_ignore_ascii_case(&name))
            .then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(http::header::AUTHORIZATION, a.parse().unwrap());
        }
        h.insert(
            http::header::COOKIE,
            "token=s3cret-token-0123456789".parse().unwrap(),
        );
        h
    }

    #[test]
    fn only_a_bearer_header_with_a_configured_token_is_allowed() {
        let mut t = Tokens::default();
        t.add("ops".into(), "s3cret-token-0123456789");
        t.add("ci".into(), "another-token-abcdefghij");
        assert_eq!(
            t.check(&headers(Some("Bearer s3cret-token-0123456789"))),
            Verdict::Allowed("ops".into())
        );
        assert_eq!(
            t.check(&headers(Some("bearer another-token-abcdefghij"))),
            Verdict::Allowed("ci".into())
        );
        // The cookie holds the right token: it is never read.
        assert_eq!(t.check(&headers(None)), Verdict::Missing);
        assert_eq!(
            t.check(&headers(Some("Basic b3BzOnMzY3JldA=="))),
            Verdict::NotBearer
        );
        assert_eq!(t.check(&headers(Some("Bearer "))), Verdict::NotBearer);
        assert_eq!(
            t.check(&headers(Some("Bearer s3cret-token-012345678"))),
            Verdict::Wrong
        );
        assert_eq!(
            t.check(&headers(Some("Bearer s3cret-token-01234567890"))),
            Verdict::Wrong
        );
    }

    #[test]
    fn credential_like_query_parameters_are_found_whatever_their_case_or_encoding() {
        assert_eq!(credential_in_query("limit=5&token=x"), Some("token".into()));
        assert_eq!(
            credential_in_query("Access_Token=x"),
            Some("Access_Token".into())
        );
        assert_eq!(credential_in_query("%74oken=x"), Some("token".into()));
        assert_eq!(credential_in_query("limit=5&state=open"), None);
    }
}
