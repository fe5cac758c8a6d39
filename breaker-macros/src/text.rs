//! Tokens as a person writes them, for messages: `&mut Vec<u8>`, not the spacing of
//! `TokenStream::to_string` (`& mut Vec < u8 >`).

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::Type;

/// `ty` as written, near enough: its tokens with the spacing a person writes
/// (`&mut Vec<u8>`, `io::Result<impl Iterator<Item = u32>>`), not the spacing of
/// `TokenStream::to_string` (`& mut Vec < u8 >`).
pub(crate) fn type_text(ty: &Type) -> String {
    tokens_text(ty.to_token_stream())
}

/// Tokens with a person's spacing; see [`type_text`].
pub(crate) fn tokens_text(tokens: TokenStream) -> String {
    let mut out = String::new();
    write_tokens(tokens, &mut out);
    out
}

fn write_tokens(tokens: TokenStream, out: &mut String) {
    use proc_macro2::{Delimiter, Spacing};
    let mut prev: Option<TokenTree> = None;
    // The previous token was the second `:` of `::`.
    let mut after_path_sep = false;
    for tt in tokens {
        let glued = match (&prev, &tt) {
            (None, _) => true,
            // `&mut`, `&'a`, `<T`, `'a`, `a::b`, `!`.
            (Some(TokenTree::Punct(p)), _) if matches!(p.as_char(), '&' | '<' | '\'' | '!') => true,
            (Some(TokenTree::Punct(p)), _) if p.as_char() == ':' && after_path_sep => true,
            (Some(TokenTree::Punct(p)), _)
                if p.as_char() == ':' && p.spacing() == Spacing::Joint =>
            {
                true
            }
            // `Vec<`, `u8>`, `a, b`, `u8; 4`, `a::`, `->`'s `>`, `self.base`.
            (_, TokenTree::Punct(p))
                if matches!(p.as_char(), ',' | '<' | '>' | ';' | ':' | '.') =>
            {
                true
            }
            (Some(TokenTree::Punct(p)), _) if p.as_char() == '.' => true,
            // `Fn()`, `fn(&str)`, but `+ (A)`.
            (Some(TokenTree::Ident(_)), TokenTree::Group(g))
                if matches!(g.delimiter(), Delimiter::Parenthesis | Delimiter::Bracket) =>
            {
                true
            }
            _ => false,
        };
        if !glued {
            out.push(' ');
        }
        after_path_sep = matches!(
            (&prev, &tt),
            (Some(TokenTree::Punct(a)), TokenTree::Punct(b))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
        );
        match &tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                write_tokens(g.stream(), out);
                out.push_str(close);
            }
            other => out.push_str(&other.to_string()),
        }
        prev = Some(tt);
    }
}
