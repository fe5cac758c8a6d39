//! The annotated function's shape: an `async fn` or a function returning a boxed future, the
//! `Result` it returns, its receiver and arguments (with the names their patterns bind), and
//! the checks on them.
//!
//! # Shapes
//! - **`async fn`** (free, inherent, trait impl, trait default method), generic, with
//!   lifetimes, `impl Trait` arguments, patterns, attributes on arguments.
//! - **A function returning `Pin<Box<dyn Future<Output = R> + ..>>`** whose body ends in
//!   `Box::pin(async move { .. })`: what `#[async_trait]` writes, or the same by hand. The
//!   statements before `Box::pin` run once, when the function is called; with retry, every
//!   attempt's future gets its own copy of the arguments and locals it captures.
//! - **Receivers**: every form the compiler accepts. A shared borrow (`&self`, `self: &Self`,
//!   `self: &'a Self`, `self: Pin<&Self>`, `self: &Arc<Self>`) is copied into each attempt;
//!   an owned receiver (`self`, `mut self`, `self: Box<Self>`, `self: Arc<Self>`,
//!   `self: Rc<Self>`, `self: Pin<Box<Self>>`, ...) is cloned for each attempt like any
//!   `Clone` argument; an exclusive borrow (`&mut self`, `self: Pin<&mut Self>`) cannot be
//!   handed to several attempts, so retry refuses it.
//! - **Return types**: `Result<T, E>` (`T` and `E` may be or contain `impl Trait`), or any
//!   path the compiler can see through to a `Result` (`io::Result<T>`, `anyhow::Result<T>`,
//!   `type Res<T> = Result<T, MyError>`), checked by the `IsResult` trait.

use crate::args::Args;
use crate::ctxt::Ctxt;
use crate::text::type_text;
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use std::collections::HashSet;
use syn::{
    Attribute, Block, Expr, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType,
    Signature, Stmt, Type,
};

/// The shape of the annotated function.
pub(crate) struct FnShape {
    /// The function as written.
    pub item: ItemFn,
    /// How its body is written.
    pub kind: FnKind,
    /// The declared `Result` type: the return type of an `async fn`, the future's `Output`
    /// of a boxed future.
    pub ret: Type,
    /// `T` and `E` of the declared return type, when written out as `Result<T, E>`; `None`
    /// for an alias (then projected through `IsResult`).
    pub ok_err: Option<(Type, Type)>,
    /// The typed arguments, in order.
    pub args: Vec<Arg>,
    /// The receiver, if a method.
    pub receiver: Option<Recv>,
}

/// How the body is written.
pub(crate) enum FnKind {
    /// `async fn`: the body is the function's block.
    Async,
    /// `fn f(..) -> Pin<Box<dyn Future<Output = R> + ..>>` ending in
    /// `Box::pin(async move { .. })`.
    Boxed {
        /// The statements before `Box::pin(..)`, run once per call.
        prep: Vec<Stmt>,
        /// The `async` block's statements: the body of one attempt.
        body: Vec<Stmt>,
        /// The names the `prep` statements bind, last binding of a name winning.
        locals: Vec<Binding>,
        /// Every identifier the `async` block mentions (macro arguments included), to know
        /// what it may capture.
        mentioned: HashSet<String>,
    },
}

/// One typed argument.
pub(crate) struct Arg {
    /// The pattern as written.
    pub pat: Pat,
    /// Its type.
    pub ty: Type,
    /// The names the pattern binds, each with the argument's attributes (`#[cfg(..)]`,
    /// `#[allow(..)]`), carried to every binding the expansion makes of it.
    pub bindings: Vec<Binding>,
}

/// One name a pattern binds.
#[derive(Clone)]
pub(crate) struct Binding {
    /// The name, with its span (and hygiene: `#[async_trait]` binds `__arg0` at its own).
    pub ident: Ident,
    /// `mut` in front of it, as written.
    pub mutability: Option<syn::Token![mut]>,
    /// The attributes of its argument or `let` statement.
    pub attrs: Vec<Attribute>,
}

/// The receiver of a method.
pub(crate) struct Recv {
    /// As written.
    pub receiver: syn::Receiver,
    /// What retry can do with it.
    pub kind: RecvKind,
}

/// What a receiver is, for retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvKind {
    /// A shared borrow (`&self`, `self: &Self`, `self: Pin<&Self>`): copied into each attempt.
    Shared,
    /// An exclusive borrow (`&mut self`, `self: Pin<&mut Self>`): one attempt at a time.
    Exclusive,
    /// Owned (`self`, `self: Box<Self>`, `self: Arc<Self>`, ..): cloned for each attempt.
    Owned,
}

pub(crate) fn fn_shape(cx: &Ctxt, item: TokenStream) -> Option<FnShape> {
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            if let Ok(decl) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
                cx.error_spanned_by(
                    &decl.sig.ident,
                    "`#[circuit_breaker]` needs the function's body; put it on the \
                     implementation (or on a default method body), not on a declaration",
                );
            } else {
                cx.error_at(
                    Span::call_site(),
                    "`#[circuit_breaker]` can only be applied to an `async fn`",
                );
            }
            return None;
        }
    };
    let sig = &item.sig;
    let (kind, ret) = if sig.asyncness.is_some() {
        match &sig.output {
            ReturnType::Type(_, ty) => (FnKind::Async, (**ty).clone()),
            ReturnType::Default => {
                cx.error_spanned_by(
                    &sig.ident,
                    format!(
                        "`{}` returns `()`, but `#[circuit_breaker]` needs a function returning \
                         `Result<T, E>`: the breaker counts `Err` as a failure",
                        sig.ident
                    ),
                );
                return None;
            }
        }
    } else if let Some(output) = boxed_future_output(&item.sig) {
        (boxed_kind(cx, &item)?, output.clone())
    } else if let (Some(_), ReturnType::Type(_, ty)) = (async_trait_block(&item.block), &sig.output)
    {
        // The boxed-future shape through an alias (`BoxFuture<'_, R>`): the attribute must
        // rewrite the future's `Output`, which it cannot find behind the alias.
        cx.error_spanned_by(
            ty,
            format!(
                "`{}` returns `{}`, which `#[circuit_breaker]` cannot see through to the \
                future's output; write the type out, \
                `Pin<Box<dyn Future<Output = Result<T, E>> + Send + '_>>`, or write `async fn`",
                sig.ident,
                type_text(ty),
            ),
        );
        return None;
    } else {
        cx.error_spanned_by(
            sig.fn_token,
            format!(
                "`#[circuit_breaker]` needs an `async fn`; `{}` is synchronous (write `async fn`)",
                sig.ident
            ),
        );
        return None;
    };
    if let Some(c) = &sig.constness {
        cx.error_spanned_by(c, "`#[circuit_breaker]` cannot be applied to a `const fn`");
    }
    let ok_err = match result_args(&ret) {
        ResultType::Spelled(ok_err) => Some(*ok_err),
        ResultType::Alias => {
            if let Some(imp) = find_impl_trait(&ret) {
                cx.error_spanned_by(
                    &imp,
                    format!(
                        "`impl Trait` cannot be named through the alias `{}`: \
                         `#[circuit_breaker]` rewrites the return type and must name its `Ok` \
                         and `Err` types; write the `Result` out, `Result<{}, E>` with the \
                         alias's error type as `E`",
                        type_text(&ret),
                        type_text(&Type::ImplTrait(imp.clone())),
                    ),
                );
                return None;
            }
            None
        }
        ResultType::Not => {
            cx.error_spanned_by(
                &ret,
                format!(
                    "`#[circuit_breaker]` needs a function returning `Result<T, E>`, found `{}`; \
                     the breaker counts `Err` as a failure",
                    type_text(&ret)
                ),
            );
            return None;
        }
    };
    let (args, receiver) = arguments(&item.sig);
    Some(FnShape {
        item,
        kind,
        ret,
        ok_err,
        args,
        receiver,
    })
}

/// What the declared return type is.
enum ResultType {
    /// `Result<T, E>` spelled out (any path ending in `Result` with two type arguments).
    Spelled(Box<(Type, Type)>),
    /// A path that may be an alias of `Result` (`io::Result<T>`, `Res<T>`): the compiler
    /// decides, through `IsResult`.
    Alias,
    /// Certainly not a `Result`: a tuple, a reference, a primitive, `Option`, ...
    Not,
}

fn result_args(ty: &Type) -> ResultType {
    let p = match ty {
        Type::Path(p) if p.qself.is_none() => p,
        Type::Paren(p) => return result_args(&p.elem),
        Type::Group(g) => return result_args(&g.elem),
        _ => return ResultType::Not,
    };
    let Some(last) = p.path.segments.last() else {
        return ResultType::Not;
    };
    let name = last.ident.to_string();
    if last.ident == "Result" {
        if let PathArguments::AngleBracketed(a) = &last.arguments {
            let types: Vec<&Type> = a
                .args
                .iter()
                .filter_map(|g| match g {
                    GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect();
            if let [ok, err] = types.as_slice() {
                return ResultType::Spelled(Box::new(((*ok).clone(), (*err).clone())));
            }
        }
        return ResultType::Alias;
    }
    // Names that are never a `Result`, so the error can be given here, at the type.
    const NOT_RESULT: &[&str] = &[
        "bool", "char", "str", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64", "String", "Option", "Vec", "Box", "Poll",
    ];
    if p.path.segments.len() == 1 && NOT_RESULT.contains(&name.as_str()) {
        return ResultType::Not;
    }
    ResultType::Alias
}

/// The first `impl Trait` inside `ty`.
fn find_impl_trait(ty: &Type) -> Option<syn::TypeImplTrait> {
    struct Find(Option<syn::TypeImplTrait>);
    impl syn::visit_mut::VisitMut for Find {
        fn visit_type_impl_trait_mut(&mut self, i: &mut syn::TypeImplTrait) {
            if self.0.is_none() {
                self.0 = Some(i.clone());
            }
        }
    }
    let mut find = Find(None);
    syn::visit_mut::VisitMut::visit_type_mut(&mut find, &mut ty.clone());
    find.0
}

/// The `R` of a return type `Pin<Box<dyn Future<Output = R> + ..>>`.
fn boxed_future_output(sig: &Signature) -> Option<&Type> {
    let ReturnType::Type(_, ty) = &sig.output else {
        return None;
    };
    future_output(ty)
}

/// The boxed-future kind: the body must end in `Box::pin(async { .. })`.
fn boxed_kind(cx: &Ctxt, item: &ItemFn) -> Option<FnKind> {
    let Some(block) = async_trait_block(&item.block) else {
        let at: TokenStream = match item.block.stmts.last() {
            Some(last) => last.to_token_stream(),
            None => item.block.to_token_stream(),
        };
        cx.error_spanned_by(
            at,
            format!(
                "`#[circuit_breaker]` on `{}`, which returns a boxed future, needs its body to \
                 end in `Box::pin(async move {{ .. }})`: that block is what each attempt runs; \
                 write the body that way, or write `async fn {}`",
                item.sig.ident, item.sig.ident
            ),
        );
        return None;
    };
    let prep: Vec<Stmt> = item.block.stmts[..item.block.stmts.len() - 1].to_vec();
    let mut locals: Vec<Binding> = Vec::new();
    for stmt in &prep {
        if let Stmt::Local(local) = stmt {
            for b in bindings(&local.pat, &local.attrs) {
                locals.retain(|l| l.ident != b.ident);
                locals.push(b);
            }
        }
    }
    let mut mentioned = HashSet::new();
    idents_in(block.block.to_token_stream(), &mut mentioned);
    Some(FnKind::Boxed {
        prep,
        body: block.block.stmts.clone(),
        locals,
        mentioned,
    })
}

/// Every identifier in `tokens`, groups included.
pub(crate) fn idents_in(tokens: TokenStream, out: &mut HashSet<String>) {
    for tt in tokens {
        match tt {
            TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            TokenTree::Group(g) => idents_in(g.stream(), out),
            _ => {}
        }
    }
}

/// The `R` in `Pin<Box<dyn Future<Output = R> + ..>>`.
pub(crate) fn future_output(ty: &Type) -> Option<&Type> {
    let Type::Path(pin) = ty else { return None };
    let seg = pin.path.segments.last()?;
    if seg.ident != "Pin" {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    let Some(GenericArgument::Type(Type::Path(boxed))) = a.args.first() else {
        return None;
    };
    let seg = boxed.path.segments.last()?;
    if seg.ident != "Box" {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    let Some(GenericArgument::Type(Type::TraitObject(dyn_))) = a.args.first() else {
        return None;
    };
    dyn_.bounds.iter().find_map(|b| {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let seg = t.path.segments.last()?;
        if seg.ident != "Future" {
            return None;
        }
        let PathArguments::AngleBracketed(a) = &seg.arguments else {
            return None;
        };
        a.args.iter().find_map(|g| match g {
            GenericArgument::AssocType(at) if at.ident == "Output" => Some(&at.ty),
            _ => None,
        })
    })
}

/// The `async` block of `Box::pin(async move { .. })`, the last statement of a body.
pub(crate) fn async_trait_block(block: &Block) -> Option<&syn::ExprAsync> {
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last() else {
        return None;
    };
    let Expr::Path(f) = &*call.func else {
        return None;
    };
    let names: Vec<String> = f
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if names.len() < 2 || names[names.len() - 2] != "Box" || names[names.len() - 1] != "pin" {
        return None;
    }
    match call.args.first() {
        Some(Expr::Async(a)) if call.args.len() == 1 => Some(a),
        _ => None,
    }
}

fn arguments(sig: &Signature) -> (Vec<Arg>, Option<Recv>) {
    let mut args = Vec::new();
    let mut receiver = None;
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => {
                receiver = Some(Recv {
                    kind: receiver_kind(&r.ty),
                    receiver: r.clone(),
                })
            }
            FnArg::Typed(t) => args.push(Arg {
                pat: (*t.pat).clone(),
                ty: (*t.ty).clone(),
                bindings: bindings(&t.pat, &t.attrs),
            }),
        }
    }
    (args, receiver)
}

/// What a receiver of type `ty` is (syn gives every receiver its type: `&self` is `&Self`).
fn receiver_kind(ty: &Type) -> RecvKind {
    match ty {
        Type::Reference(r) if r.mutability.is_some() => RecvKind::Exclusive,
        Type::Reference(_) => RecvKind::Shared,
        Type::Paren(p) => receiver_kind(&p.elem),
        Type::Group(g) => receiver_kind(&g.elem),
        Type::Path(p) => {
            let Some(last) = p.path.segments.last() else {
                return RecvKind::Owned;
            };
            if last.ident != "Pin" {
                return RecvKind::Owned;
            }
            match &last.arguments {
                PathArguments::AngleBracketed(a) => match a.args.first() {
                    Some(GenericArgument::Type(inner @ Type::Reference(_))) => receiver_kind(inner),
                    _ => RecvKind::Owned,
                },
                _ => RecvKind::Owned,
            }
        }
        _ => RecvKind::Owned,
    }
}

/// The names `pat` binds, each with `attrs`.
pub(crate) fn bindings(pat: &Pat, attrs: &[Attribute]) -> Vec<Binding> {
    let mut out = Vec::new();
    collect_bindings(pat, attrs, &mut out);
    out
}

fn collect_bindings(pat: &Pat, attrs: &[Attribute], out: &mut Vec<Binding>) {
    match pat {
        Pat::Ident(p) => {
            out.push(Binding {
                ident: p.ident.clone(),
                mutability: if p.by_ref.is_some() {
                    None
                } else {
                    p.mutability
                },
                attrs: attrs.to_vec(),
            });
            if let Some((_, sub)) = &p.subpat {
                collect_bindings(sub, attrs, out);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| collect_bindings(p, attrs, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| collect_bindings(p, attrs, out)),
        Pat::Struct(s) => s
            .fields
            .iter()
            .for_each(|f| collect_bindings(&f.pat, attrs, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| collect_bindings(p, attrs, out)),
        Pat::Reference(r) => collect_bindings(&r.pat, attrs, out),
        Pat::Type(t) => collect_bindings(&t.pat, attrs, out),
        Pat::Paren(p) => collect_bindings(&p.pat, attrs, out),
        // Every alternative binds the same names.
        Pat::Or(o) => {
            if let Some(first) = o.cases.first() {
                collect_bindings(first, attrs, out);
            }
        }
        _ => {}
    }
}

/// `pat` without `mut` on its bindings (the signature's copy, when the attempts bind the
/// names again, `mut` as written).
pub(crate) fn strip_mut(pat: &mut Pat) {
    struct Strip;
    impl syn::visit_mut::VisitMut for Strip {
        fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
            if p.by_ref.is_none() {
                p.mutability = None;
            }
            syn::visit_mut::visit_pat_ident_mut(self, p);
        }
    }
    syn::visit_mut::VisitMut::visit_pat_mut(&mut Strip, pat);
}

/// A `&mut` argument cannot be handed to several attempts: said here, at the argument, rather
/// than by the `Reusable` bound, whose error names the hidden support module.
pub(crate) fn check_no_mut_ref_arguments(cx: &Ctxt, func: &FnShape, args: &Args) {
    for arg in &func.args {
        let Type::Reference(r) = &arg.ty else {
            continue;
        };
        if r.mutability.is_none() {
            continue;
        }
        let shared = Type::Reference(syn::TypeReference {
            mutability: None,
            ..r.clone()
        });
        let mut err = syn::Error::new_spanned(
            &arg.ty,
            format!(
                "retry runs `{}` more than once, but argument `{}` is a `{}`, which only one \
                 attempt can hold; take `{}`, an owned `Clone` value, or remove `retry`",
                func.item.sig.ident,
                arg.pat.to_token_stream(),
                type_text(&arg.ty),
                type_text(&shared),
            ),
        );
        if let Some(retry) = &args.retry {
            err.combine(syn::Error::new(retry.key, "retry is configured here"));
        }
        if let Some(hedge) = &args.hedge {
            err.combine(syn::Error::new(
                hedge.key,
                "hedge runs it more than once too",
            ));
        }
        cx.syn_error(err);
    }
}

/// An exclusive receiver (`&mut self`, `self: Pin<&mut Self>`) cannot be handed to several
/// attempts. (An owned one is cloned; the `ReusableSelf` bound says so if it cannot be.)
pub(crate) fn check_receiver_reusable(cx: &Ctxt, func: &FnShape, args: &Args) {
    let Some(r) = &func.receiver else { return };
    if r.kind != RecvKind::Exclusive {
        return;
    }
    let written = receiver_text(&r.receiver);
    let shared =
        if r.receiver.colon_token.is_some() && !matches!(*r.receiver.ty, Type::Reference(_)) {
            "`&self` (or `self: Pin<&Self>`)"
        } else {
            "`&self`"
        };
    let mut err = syn::Error::new_spanned(
        &r.receiver,
        format!(
            "retry runs `{}` more than once, but `{written}` is an exclusive borrow: an \
             attempt's future holds it until it completes, so no other attempt can have it; \
             take {shared} (with interior mutability for what the body changes), or remove \
             `retry`",
            func.item.sig.ident
        ),
    );
    if let Some(retry) = &args.retry {
        err.combine(syn::Error::new(retry.key, "retry is configured here"));
    }
    if let Some(hedge) = &args.hedge {
        err.combine(syn::Error::new(
            hedge.key,
            "hedge runs it more than once too",
        ));
    }
    cx.syn_error(err);
}

/// The receiver as written: `&mut self`, `self: Pin<&mut Self>`.
fn receiver_text(r: &syn::Receiver) -> String {
    if r.colon_token.is_some() {
        format!("self: {}", type_text(&r.ty))
    } else {
        let mut s = String::new();
        if let Some((_, lifetime)) = &r.reference {
            s.push('&');
            if let Some(l) = lifetime {
                s.push_str(&format!("{l} "));
            }
        }
        if r.mutability.is_some() {
            s.push_str("mut ");
        }
        s.push_str("self");
        s
    }
}

#[cfg(test)]
mod tests;
