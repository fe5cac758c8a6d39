//! The annotated function's shape: async or the `async-trait` shape, the `Result` it
//! returns, its arguments and receiver, and the checks on them.

use crate::args::Args;
use crate::ctxt::Ctxt;
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{
    Block, Expr, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType, Signature,
    Stmt, Type,
};

/// The shape of the annotated function.
pub struct FnShape {
    /// The function as written.
    pub item: ItemFn,
    /// How its body is written.
    pub kind: FnKind,
    /// The declared return type, `Result<T, E>` (or an alias named `Result`).
    pub ret: Type,
    /// `T` and `E` of the declared return type, when written out as `Result<T, E>`.
    pub ok_err: Option<(Type, Type)>,
    /// The arguments the body uses, in order.
    pub args: Vec<Arg>,
    /// The receiver, if a method.
    pub receiver: Option<syn::Receiver>,
}

/// How the body is written.
pub enum FnKind {
    /// `async fn`: the body is the function's block.
    Async,
    /// The shape `#[async_trait]` produces: `fn f(..) -> Pin<Box<dyn Future<Output = R> + ..>>`
    /// whose last statement is `Box::pin(async move { .. })`; the body is that async block.
    AsyncTrait,
}

/// One typed argument.
pub struct Arg {
    /// The name it has in the rewritten signature (the user's name for a plain `name: T`,
    /// `__breaker_argN` for a pattern).
    pub binding: Ident,
    /// The pattern the body expects (`name`, `mut name`, `(a, b)`).
    pub pat: Pat,
    /// Its type.
    pub ty: Type,
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
    } else if let Some(ret) = async_trait_output(&item) {
        (FnKind::AsyncTrait, ret)
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
        Some(ok_err) => ok_err,
        None => {
            cx.error_spanned_by(
                &ret,
                format!(
                    "`#[circuit_breaker]` needs a function returning `Result<T, E>`, found `{}`; \
                     the breaker counts `Err` as a failure",
                    ret.to_token_stream()
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

/// `Some(Some((T, E)))` for `Result<T, E>`, `Some(None)` for an alias such as `io::Result<T>`,
/// `None` for anything that is not named `Result`.
#[allow(clippy::option_option)]
fn result_args(ty: &Type) -> Option<Option<(Type, Type)>> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let last = p.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
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
            return Some(Some(((*ok).clone(), (*err).clone())));
        }
    }
    Some(None)
}

/// The `R` of `Pin<Box<dyn Future<Output = R> + ..>>` when the function has the shape
/// `#[async_trait]` generates and its last statement is `Box::pin(async move { .. })`.
fn async_trait_output(item: &ItemFn) -> Option<Type> {
    async_trait_block(&item.block)?;
    let ReturnType::Type(_, ty) = &item.sig.output else {
        return None;
    };
    future_output(ty).cloned()
}

/// The `R` in `Pin<Box<dyn Future<Output = R> + ..>>`.
pub fn future_output(ty: &Type) -> Option<&Type> {
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

/// The `async move { .. }` block of `Box::pin(async move { .. })`, the last statement of an
/// `#[async_trait]` method's body.
pub fn async_trait_block(block: &Block) -> Option<&syn::ExprAsync> {
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

fn arguments(sig: &Signature) -> (Vec<Arg>, Option<syn::Receiver>) {
    let mut args = Vec::new();
    let mut receiver = None;
    for (i, input) in sig.inputs.iter().enumerate() {
        match input {
            FnArg::Receiver(r) => receiver = Some(r.clone()),
            FnArg::Typed(t) => {
                let binding = match &*t.pat {
                    Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => p.ident.clone(),
                    other => Ident::new(&format!("__breaker_arg{i}"), other.span()),
                };
                args.push(Arg {
                    binding,
                    pat: (*t.pat).clone(),
                    ty: (*t.ty).clone(),
                });
            }
        }
    }
    (args, receiver)
}

pub(crate) fn key_argument(cx: &Ctxt, key: &Ident, func: &FnShape) -> Option<Ident> {
    if let Some(arg) = func.args.iter().find(|a| a.binding == *key) {
        return Some(arg.binding.clone());
    }
    let names: Vec<String> = func
        .args
        .iter()
        .filter(|a| !a.binding.to_string().starts_with("__breaker_"))
        .map(|a| format!("`{}`", a.binding))
        .collect();
    let list = if names.is_empty() {
        "the function has no named arguments".to_string()
    } else {
        format!("its arguments are {}", names.join(", "))
    };
    cx.error_spanned_by(
        key,
        format!(
            "`key = {key}` names no argument of `{}`; {list}",
            func.item.sig.ident
        ),
    );
    None
}

/// A receiver taken by value or by `&mut` cannot be handed to a second attempt.
/// A `&mut` argument cannot be handed to several attempts: said here, at the argument, rather
/// than by the `Reusable` bound, whose error names the hidden support module and ends with a
/// suggestion that does not compile.
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
        cx.syn_error(err);
    }
}

/// `ty` as written, near enough: its tokens without the spaces `to_string` puts around
/// `&`, `<`, `>`, `::` and `,`.
fn type_text(ty: &Type) -> String {
    ty.to_token_stream()
        .to_string()
        .replace("& ", "&")
        .replace(" < ", "<")
        .replace(" <", "<")
        .replace(" >", ">")
        .replace(" :: ", "::")
        .replace(" ,", ",")
}

pub(crate) fn check_receiver_reusable(cx: &Ctxt, func: &FnShape, args: &Args) {
    let Some(r) = &func.receiver else { return };
    let shared_ref = r.reference.is_some() && r.mutability.is_none();
    if shared_ref {
        return;
    }
    let how = if r.reference.is_some() {
        "`&mut self` is borrowed exclusively"
    } else {
        "`self` is moved into the first attempt"
    };
    let mut err = syn::Error::new_spanned(
        r,
        format!(
            "retry runs `{}` more than once, but {how}, so it cannot be reused by the next \
             attempt; take `&self`, or remove `retry`",
            func.item.sig.ident
        ),
    );
    if let Some(retry) = &args.retry {
        err.combine(syn::Error::new(retry.key, "retry is configured here"));
    }
    cx.syn_error(err);
}
