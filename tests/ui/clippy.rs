//! Every ui pass case (`tests/ui/pass/*.rs`) in one crate, so that `cargo clippy
//! --workspace --all-targets` lints them as a user's crate: under `deny(warnings)`, every
//! clippy lint of `clippy::all` and `clippy::pedantic` denied, the attribute's expansion
//! must add no warning of its own. `tests/ui.rs` checks that this list names every case.
#![deny(warnings, clippy::all, clippy::pedantic)]
// About the cases' own code, not the expansion: their `main`s unwrap, a fallback is an
// `async fn` whether it awaits or not.
#![allow(clippy::missing_panics_doc, clippy::unused_async)]

#[path = "pass/arg_attributes.rs"]
pub mod arg_attributes_case;
#[path = "pass/async_trait.rs"]
pub mod async_trait_case;
#[path = "pass/boxed_future.rs"]
pub mod boxed_future_case;
#[path = "pass/classify_values.rs"]
pub mod classify_values_case;
#[path = "pass/config_shared_scope.rs"]
pub mod config_shared_scope_case;
#[path = "pass/every_option.rs"]
pub mod every_option_case;
#[path = "pass/flatten.rs"]
pub mod flatten_case;
#[path = "pass/free_fn.rs"]
pub mod free_fn_case;
#[path = "pass/generic_fn.rs"]
pub mod generic_fn_case;
#[path = "pass/impl_trait_args.rs"]
pub mod impl_trait_args_case;
#[path = "pass/impl_trait_return.rs"]
pub mod impl_trait_return_case;
#[path = "pass/key_expression.rs"]
pub mod key_expression_case;
#[path = "pass/keyed.rs"]
pub mod keyed_case;
#[path = "pass/method_ref_self.rs"]
pub mod method_ref_self_case;
#[path = "pass/named_policy.rs"]
pub mod named_policy_case;
#[path = "pass/native_async_fn_in_trait.rs"]
pub mod native_async_fn_in_trait_case;
#[path = "pass/no_warnings_on_user_code.rs"]
pub mod no_warnings_on_user_code_case;
#[path = "pass/patterns_and_mut_args.rs"]
pub mod patterns_and_mut_args_case;
#[path = "pass/question_mark_and_return.rs"]
pub mod question_mark_and_return_case;
#[path = "pass/receivers.rs"]
pub mod receivers_case;
#[path = "pass/renamed_crate.rs"]
pub mod renamed_crate_case;
#[path = "pass/result_alias.rs"]
pub mod result_alias_case;
#[path = "pass/result_aliases.rs"]
pub mod result_aliases_case;
#[path = "pass/scope_shared.rs"]
pub mod scope_shared_case;
#[path = "pass/timeout_longer_than_cooldown.rs"]
pub mod timeout_longer_than_cooldown_case;
#[path = "pass/window_buckets.rs"]
pub mod window_buckets_case;

fn main() {
    arg_attributes_case::main();
    async_trait_case::main();
    boxed_future_case::main();
    classify_values_case::main();
    config_shared_scope_case::main();
    every_option_case::main();
    flatten_case::main();
    free_fn_case::main();
    generic_fn_case::main();
    impl_trait_args_case::main();
    impl_trait_return_case::main();
    key_expression_case::main();
    keyed_case::main();
    method_ref_self_case::main();
    named_policy_case::main();
    native_async_fn_in_trait_case::main();
    no_warnings_on_user_code_case::main();
    patterns_and_mut_args_case::main();
    question_mark_and_return_case::main();
    receivers_case::main();
    renamed_crate_case::main();
    result_alias_case::main();
    result_aliases_case::main();
    scope_shared_case::main();
    timeout_longer_than_cooldown_case::main();
    window_buckets_case::main();
}
