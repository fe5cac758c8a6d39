//! Small token rewrites of the expansion: `self` in a body that retry re-runs with a copy of
//! an owned receiver, `impl Trait` where a type must be written out, and spans that point at
//! the user's tokens while marking the code as generated.

use proc_macro2::{Group, Ident, Span, TokenStream, TokenTree};
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, Item, Macro, Stmt, Type};

/// `span`'s place in the user's code, with the macro's own hygiene (`call_site`): errors land
/// on the user's token, while the compiler and clippy see generated code there (no "consider
/// borrowing here" suggestion into the user's signature, no `used_underscore_binding` on an
/// argument the expansion copies).
pub(crate) fn at(span: Span) -> Span {
    Span::call_site().located_at(span)
}

/// `tokens` with every span set to `span`, groups included, so an error about the whole
/// expression (not only one of its tokens) lands there too.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                t = TokenTree::Group(group);
            } else {
                t.set_span(span);
            }
            t
        })
        .collect()
}

/// Replaces the receiver `self` with `with` in `stmts`, keeping each `self` token's span.
/// Returns whether any `self` was found.
///
/// Only the value `self` is replaced: `self::item` paths, `Self`, and the `self` of nested
/// items (an inner `impl` or `fn`) are left alone; macro arguments are rewritten token by
/// token (the compiler has not parsed them yet), `macro_rules!` bodies defined in the body
/// too, as `async-trait` does.
pub(crate) fn replace_self(stmts: &mut [Stmt], with: &str) -> bool {
    let mut v = ReplaceSelf { with, found: false };
    for stmt in stmts {
        v.visit_stmt_mut(stmt);
    }
    v.found
}

struct ReplaceSelf<'a> {
    with: &'a str,
    found: bool,
}

impl ReplaceSelf<'_> {
    fn tokens(&mut self, tokens: TokenStream) -> TokenStream {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut out = Vec::with_capacity(tts.len());
        for (i, tt) in tts.iter().enumerate() {
            match tt {
                TokenTree::Ident(ident) if ident == "self" && !path_follows(&tts[i + 1..]) => {
                    self.found = true;
                    out.push(TokenTree::Ident(Ident::new(self.with, ident.span())));
                }
                TokenTree::Group(g) => {
                    let mut group = Group::new(g.delimiter(), self.tokens(g.stream()));
                    group.set_span(g.span());
                    out.push(TokenTree::Group(group));
                }
                other => out.push(other.clone()),
            }
        }
        out.into_iter().collect()
    }
}

/// Whether `rest` starts with `::` (so the `self` before it is a module path).
fn path_follows(rest: &[TokenTree]) -> bool {
    matches!(rest.first(), Some(TokenTree::Punct(p)) if p.as_char() == ':')
}

impl VisitMut for ReplaceSelf<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Path(p) = e {
            if p.qself.is_none() && p.path.is_ident("self") {
                let seg = &mut p.path.segments[0];
                seg.ident = Ident::new(self.with, seg.ident.span());
                self.found = true;
                return;
            }
        }
        visit_mut::visit_expr_mut(self, e);
    }

    fn visit_item_mut(&mut self, i: &mut Item) {
        // A nested item has its own `self`, if any; a local `macro_rules!` may name ours.
        if let Item::Macro(m) = i {
            if m.mac.path.is_ident("macro_rules") {
                self.visit_macro_mut(&mut m.mac);
            }
        }
    }

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        mac.tokens = self.tokens(std::mem::take(&mut mac.tokens));
    }
}

/// `ty` with every `impl Trait` replaced by `_`: for a `let` annotation or a turbofish,
/// where `impl Trait` is not allowed (E0562) and inference finds the type instead.
pub(crate) fn erase_impl_trait(ty: &Type) -> Type {
    struct Erase;
    impl VisitMut for Erase {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(imp) = ty {
                *ty = Type::Infer(syn::TypeInfer {
                    underscore_token: syn::Token![_](syn::spanned::Spanned::span(imp)),
                });
                return;
            }
            visit_mut::visit_type_mut(self, ty);
        }
    }
    let mut ty = ty.clone();
    Erase.visit_type_mut(&mut ty);
    ty
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::{quote, ToTokens};

    fn replaced(body: TokenStream) -> String {
        let mut block: syn::Block = syn::parse2(quote!({ #body })).unwrap();
        replace_self(&mut block.stmts, "__s");
        block.to_token_stream().to_string()
    }

    #[test]
    fn replaces_the_value_self_only() {
        let out = replaced(quote! {
            let a = self.base.clone();
            let b = self::helper(&self);
            let c = Self::new();
            println!("{} {}", self.base, self::X);
            impl Foo { fn g(&self) -> u32 { self.x } }
            let f = move || self.len();
        });
        assert!(out.contains("let a = __s . base . clone ()"), "{out}");
        assert!(out.contains("self :: helper (& __s)"), "{out}");
        assert!(out.contains("Self :: new ()"), "{out}");
        assert!(out.contains("__s . base , self :: X"), "{out}");
        assert!(out.contains("fn g (& self) -> u32 { self . x }"), "{out}");
        assert!(out.contains("move | | __s . len ()"), "{out}");
    }

    #[test]
    fn impl_trait_becomes_infer() {
        let ty: Type = syn::parse2(quote!(Result<Box<impl Iterator<Item = u32> + '_>, E>)).unwrap();
        let erased = erase_impl_trait(&ty).to_token_stream().to_string();
        assert_eq!(erased, "Result < Box < _ > , E >");
    }
}
