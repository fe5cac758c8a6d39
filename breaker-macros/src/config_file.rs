//! Reading and checking a `config = ".."` file while compiling.

use crate::ctxt::Ctxt;
use crate::validate::ConfigFile;
use syn::LitStr;

/// Reads `config` (relative to the crate root) at compile time and checks that policy `name`
/// exists in it and is valid, with the same loader the run-time registry uses. Problems with
/// the policy are reported under `name`, problems with the file under `config`.
pub(crate) fn check_config_file(cx: &Ctxt, name: &LitStr, config: &LitStr) -> Option<ConfigFile> {
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
    match breaker_core::__private::check_named_policy(&file, &text, &name.value()) {
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
