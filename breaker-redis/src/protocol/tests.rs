//! Unit tests of the reply checks and the published-message parser.

use super::*;

fn item(fields: Vec<Value>) -> Value {
    Value::Array(vec![
        Value::BulkString(b"brk1".to_vec()),
        Value::Int(1_700_000_000_000),
        Value::Int(1),
        Value::Int(3),
        Value::Array(fields),
    ])
}

fn good() -> Vec<Value> {
    vec![
        Value::Int(0),
        Value::Int(4),
        Value::Int(1),
        Value::Int(1_700_000_030_000),
        Value::Int(1),
        Value::Int(0),
        Value::Int(0),
        Value::Int(0),
        Value::BulkString(b"r1".to_vec()),
        Value::Int(1),
        Value::BulkString(b"00ff".to_vec()),
        Value::Array(vec![]),
        Value::Int(0),
    ]
}

#[test]
fn a_good_reply_parses() {
    let r = parse(Op::Flush, item(good()), 1).unwrap();
    assert_eq!(r.server_now_ms, 1_700_000_000_000);
    assert_eq!(r.items[0].state.state, State::Open);
    assert_eq!(r.items[0].state.deadline_ms, Some(1_700_000_030_000));
    assert_eq!(r.items[0].state.caused_by.as_ref().unwrap().as_str(), "r1");
}

#[test]
fn malformed_replies_are_errors_not_panics() {
    let cases: Vec<(usize, Value, &str)> = vec![
        (2, Value::Int(9), "state"),
        (1, Value::Int(-1), "generation"),
        (1, Value::BulkString(b"4".to_vec()), "generation"),
        (3, Value::Int(0), "deadline 0"),
        (4, Value::Int(256), "open streak"),
        (8, Value::BulkString(b"a b".to_vec()), "caused by"),
        (9, Value::Int(6), "reason"),
        (11, Value::Int(0), "granted"),
        (0, Value::Nil, "code"),
    ];
    for (at, v, what) in cases {
        let mut f = good();
        f[at] = v;
        let e = parse(Op::Flush, item(f), 1).unwrap_err();
        assert!(
            matches!(&e, StoreError::Malformed { what: w, .. } if w.contains(what)),
            "field {at}: {e}"
        );
    }
    assert!(parse(Op::Flush, Value::Nil, 1).is_err());
    assert!(parse(Op::Flush, item(good()), 2).is_err(), "item count");
    let mut f = good();
    f.pop();
    assert!(parse(Op::Flush, item(f), 1).is_err(), "field count");
    let mut f = good();
    f[11] = Value::Array(vec![Value::BulkString(b"3:x:1:r1".to_vec())]);
    f[12] = Value::Int(5);
    assert!(
        parse(Op::Flush, item(f), 1).is_err(),
        "lease of another generation"
    );
}

#[test]
fn published_messages_are_checked() {
    let p = parse_published(b"brk1|up#h%3A1|7|1|1700000030000|1700000000000|r-1|1|2").unwrap();
    assert_eq!(p.state.streak, 2);
    assert_eq!(p.id.as_str(), "up#h%3A1");
    assert_eq!(p.state.generation, 7);
    assert_eq!(p.state.reason, Reason::FailureRate);
    for bad in [
        &b"brk2|a|1|0|0|1|r|1|0"[..],
        b"brk1|a b|1|0|0|1|r|1|0",
        b"brk1|a|1|1|0|1|r|1|0",
        b"brk1|a|1|0|0|1|r|1|0|x",
        b"brk1|a|-1|0|0|1|r|1|0",
        b"brk1|a|1|7|0|1|r|1|0",
        b"brk1|a|1|0|0|1|r|1|256",
        b"brk1|a|1|0|0|1|r|1",
        b"\xff",
    ] {
        assert!(parse_published(bad).is_none(), "{bad:?}");
    }
}
