//! Reading and checking a `config = ".."` file while compiling.

use crate::ctxt::Ctxt;
use crate::validate::{ConfigFile, Source, Spec};
use proc_macro2::TokenStream;
use quote::quote;
use syn::LitStr;

/// The function's entry in the link-time list of annotated functions
/// (`breaker::__private::REGISTERED`, through `linkme`): its name, its `policy` and `config`,
/// whether it is keyed. Installing a registry checks every named policy against it before any
/// function runs, and `breaker::annotated::functions` lists it.
pub(crate) fn registration(spec: &Spec, name: &TokenStream) -> TokenStream {
    let krate = &spec.krate;
    let none = quote!(::core::option::Option::None);
    let (policy, config) = match &spec.source {
        Source::Named { policy, config } => (
            quote!(::core::option::Option::Some(#policy)),
            match config {
                Some(c) => {
                    let literal = &c.literal;
                    quote!(::core::option::Option::Some(#literal))
                }
                None => none.clone(),
            },
        ),
        Source::Inline(_) => (none.clone(), none),
    };
    let keyed = spec.key.is_some();
    quote! {
        #[#krate::__private::linkme::distributed_slice(#krate::__private::REGISTERED)]
        #[linkme(crate = #krate::__private::linkme)]
        static __BREAKER_REGISTERED: #krate::__private::Registered = #krate::__private::Registered {
            function: #name,
            policy: #policy,
            config: #config,
            keyed: #keyed,
        };
    }
}

/// Reads `config` (relative to the crate root) at compile time and checks that policy `name`
/// exists in it and is valid, with the same loader the run-time registry uses. Problems with
/// the policy are reported under `name`, problems with the file under `config`.
pub(crate) fn check_config_file(
    cx: &Ctxt,
    name: &LitStr,
    config: &LitStr,
    keyed: bool,
) -> Option<ConfigFile> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let path = std::path::Path::new(&dir).join(config.value());
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_owned(),
                _ => e.to_string(),
            };
            cx.error_spanned_by(
                config,
                format!(
                    "cannot read config file `{}`: {why}; the path is relative to the crate root \
                     (the directory of Cargo.toml)",
                    config.value()
                ),
            );
            return None;
        }
    };
    let file = config.value();
    match breaker_core::__private::check_named_policy(&file, &text, &name.value(), keyed) {
        Ok(()) => Some(ConfigFile {
            literal: config.clone(),
            path: path.to_string_lossy().into_owned(),
        }),
        Err(errors) => {
            for e in errors {
                let at = if e.about_policy { name } else { config };
                cx.error_spanned_by(at, e.message);
            }
            None
        }
    }
}
