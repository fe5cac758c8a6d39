//! Shapes the attribute accepts and the names their patterns bind.

use super::*;
use crate::text::tokens_text;

fn text(src: &str) -> String {
    type_text(&syn::parse_str::<Type>(src).unwrap())
}

#[test]
fn types_print_as_written() {
    assert_eq!(text("&mut Vec<u8>"), "&mut Vec<u8>");
    assert_eq!(text("& 'a str"), "&'a str");
    assert_eq!(text("Res<u32>"), "Res<u32>");
    assert_eq!(
        text("std::io::Result<(u32, String)>"),
        "std::io::Result<(u32, String)>"
    );
    assert_eq!(
        text("io::Result<impl Iterator<Item = u32> + Send>"),
        "io::Result<impl Iterator<Item = u32> + Send>"
    );
    assert_eq!(text("Pin<&mut Self>"), "Pin<&mut Self>");
    assert_eq!(text("[u8; 4]"), "[u8; 4]");
    assert_eq!(text("fn(&str) -> bool"), "fn(&str) -> bool");
    assert_eq!(text("dyn Fn() + 'static"), "dyn Fn() + 'static");
    let key: syn::Expr = syn::parse_str("self.host().len()").unwrap();
    assert_eq!(tokens_text(key.to_token_stream()), "self.host().len()");
}

fn kind(src: &str) -> RecvKind {
    let f: syn::ImplItemFn = syn::parse_str(&format!("fn f({src}) {{}}")).unwrap();
    let Some(FnArg::Receiver(r)) = f.sig.inputs.first() else {
        panic!("no receiver in {src}")
    };
    receiver_kind(&r.ty)
}

#[test]
fn every_receiver_form_has_a_kind() {
    for shared in [
        "&self",
        "&'a self",
        "self: &Self",
        "self: &'a Self",
        "self: Pin<&Self>",
        "self: &Arc<Self>",
    ] {
        assert_eq!(kind(shared), RecvKind::Shared, "{shared}");
    }
    for exclusive in [
        "&mut self",
        "&'a mut self",
        "self: &mut Self",
        "self: Pin<&mut Self>",
        "self: core::pin::Pin<&'a mut Self>",
    ] {
        assert_eq!(kind(exclusive), RecvKind::Exclusive, "{exclusive}");
    }
    for owned in [
        "self",
        "mut self",
        "self: Self",
        "self: Box<Self>",
        "self: Arc<Self>",
        "self: Rc<Self>",
        "self: Pin<Box<Self>>",
        "mut self: Box<Self>",
    ] {
        assert_eq!(kind(owned), RecvKind::Owned, "{owned}");
    }
}

#[test]
fn patterns_bind_their_names() {
    let pat: Pat = Pat::parse_single
        .parse_str("(mut a, Point { x, y: ref yy }, [first, ..], _, b @ Some(_))")
        .unwrap();
    let names: Vec<String> = bindings(&pat, &[])
        .iter()
        .map(|b| {
            format!(
                "{}{}",
                if b.mutability.is_some() { "mut " } else { "" },
                b.ident
            )
        })
        .collect();
    assert_eq!(names, ["mut a", "x", "yy", "first", "b"]);
}

use syn::parse::Parser;
