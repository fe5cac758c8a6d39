//! Unit tests of the reply checks and the published-message parser.

use super::parse::{check, parse};
use super::*;
use breaker_core::breaker::State;

/// Open, streak 1, generation 4: the word the core encodes.
fn open_word() -> Word {
    Word {
        state: State::Open,
        successes: 0,
        in_flight: 0,
        streak: 1,
        generation: 4,
    }
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn reply(items: Vec<Value>) -> Value {
    let mut top = vec![
        bulk("brk2"),
        Value::Int(1_700_000_000_000),
        bulk("1700.5"),
        Value::Int(1),
        Value::Int(3),
    ];
    top.extend(items);
    Value::Array(top)
}

fn good() -> Vec<Value> {
    vec![
        Value::Int(0),
        bulk(&open_word().encode().to_string()),
        Value::Int(0),
        Value::Int(1_700_000_030_000),
        bulk("r1"),
        Value::Int(1),
        bulk("00ff"),
    ]
}

fn parsed(op: Op, items: Vec<Value>, n: usize) -> Result<Reply, StoreError> {
    parse(op, reply(items), n, &Redactor::default())
}

#[test]
fn a_good_reply_parses() {
    let r = parsed(Op::Read, vec![Value::Array(good())], 1).unwrap();
    assert_eq!(r.server_now_ms, 1_700_000_000_000);
    assert_eq!(&*r.epoch, "1700.5");
    let s = r.items[0].stored.as_ref().unwrap();
    assert_eq!(s.word, open_word());
    assert_eq!(s.deadline_ms, 1_700_000_030_000);
    assert_eq!(s.by.as_ref().unwrap().as_str(), "r1");
    assert_eq!(s.reason, TransitionReason::FailureRate);
    // A missing breaker: no word.
    let mut f = good();
    f[0] = Value::Int(2);
    f[1] = bulk("");
    f[3] = Value::Int(0);
    let r = parsed(Op::Read, vec![Value::Array(f)], 1).unwrap();
    assert_eq!(
        (r.items[0].code, &r.items[0].stored),
        (Code::Missing, &None)
    );
}

#[test]
fn malformed_replies_are_errors_not_panics() {
    let half_open_with_probes = Word {
        state: State::HalfOpen,
        in_flight: 3,
        ..open_word()
    };
    let cases: Vec<(usize, Value, &str)> = vec![
        // A tag the core does not know, or probes in flight inside the stored word.
        (1, bulk("7"), "not a state word"),
        (
            1,
            bulk(&half_open_with_probes.encode().to_string()),
            "not a state word",
        ),
        (1, bulk("12x"), "not a state word"),
        (1, Value::Int(4), "word"),
        (2, Value::Int(70_000), "probes in flight"),
        (3, Value::Int(0), "deadline 0"),
        (4, bulk("a b"), "`by`"),
        (5, Value::Int(9), "reason"),
        (0, Value::Int(6), "code"),
        (0, Value::Nil, "code"),
    ];
    for (at, v, what) in cases {
        let mut f = good();
        f[at] = v;
        let e = parsed(Op::Read, vec![Value::Array(f)], 1).unwrap_err();
        assert!(
            matches!(&e, StoreError::Malformed { what: w, .. } if w.contains(what)),
            "field {at}: {e}"
        );
    }
    assert!(parse(Op::Read, Value::Nil, 1, &Redactor::default()).is_err());
    assert!(
        parsed(Op::Read, vec![Value::Array(good())], 2).is_err(),
        "item count"
    );
    let mut f = good();
    f.pop();
    assert!(
        parsed(Op::Read, vec![Value::Array(f)], 1).is_err(),
        "field count"
    );
    // A read has no extra values; an applied add has the window's totals.
    let mut f = good();
    f.push(Value::Int(1));
    assert!(parsed(Op::Read, vec![Value::Array(f)], 1).is_err());
    assert!(parsed(Op::Add, vec![Value::Array(good())], 1).is_err());
    // A lease of another epoch, or expiring before the server's now.
    let mut f = good();
    f.extend([bulk("1:other:r1"), Value::Int(1_700_000_001_000)]);
    assert!(parsed(Op::Cas, vec![Value::Array(f)], 1).is_err());
    let mut f = good();
    f.extend([bulk("1:1700.5:r1"), Value::Int(1_699_999_999_000)]);
    assert!(parsed(Op::Cas, vec![Value::Array(f)], 1).is_err());
    let mut f = good();
    f.extend([bulk("1:1700.5:r1"), Value::Int(1_700_000_001_000)]);
    let r = parsed(Op::Cas, vec![Value::Array(f)], 1).unwrap();
    let Extra::Granted(l) = &r.items[0].extra else {
        panic!("granted")
    };
    assert_eq!(
        (l[0].id(), l[0].generation(), l[0].expiry_ms()),
        ("1:1700.5:r1", 4, 1_700_000_001_000)
    );
}

/// Each op's own rules: an applied write answers the word it sent, a stale one another.
#[test]
fn each_op_answer_is_checked_against_its_request() {
    let t = Target::new(
        &Namespace::new("ns").unwrap(),
        BreakerId::new("b").unwrap(),
        Params {
            fingerprint: "00ff".into(),
            ttl_ms: 1,
            window_ms: 1,
            buckets: 1,
            cap: 2,
            lease_ms: 1,
            quorum: 1,
        },
    );
    let closed = Word {
        state: State::Closed,
        streak: 0,
        ..open_word()
    };
    let answer = |code, w: Option<Word>, extra| ItemReply {
        code,
        stored: w.map(|word| Stored {
            word,
            deadline_ms: 0,
            by: None,
            reason: TransitionReason::Manual,
            fingerprint: String::new(),
        }),
        extra,
    };
    let cas = CasItem {
        target: &t,
        expect: Some(closed),
        next: open_word(),
        reason: TransitionReason::ConsecutiveFailures,
        join: false,
        not_before: 0,
        cooldown_ms: Some(1),
        want: 0,
        release: None,
    };
    assert!(check::cas(
        &answer(Code::Applied, Some(open_word()), Extra::None),
        &cas,
        0
    )
    .is_ok());
    assert!(check::cas(&answer(Code::Applied, Some(closed), Extra::None), &cas, 0).is_err());
    assert!(check::cas(&answer(Code::Stale, Some(closed), Extra::None), &cas, 0).is_err());
    assert!(check::cas(
        &answer(Code::Stale, Some(open_word()), Extra::None),
        &cas,
        0
    )
    .is_ok());
    assert!(check::cas(&answer(Code::Missing, None, Extra::None), &cas, 0).is_ok());
    let add = AddItem {
        target: &t,
        expect: closed,
        create: false,
        successes: 3,
        failures: 1,
        slow: 0,
    };
    let totals = |s, f| Extra::Totals {
        successes: s,
        failures: f,
        slow: 0,
    };
    assert!(check::add(&answer(Code::Applied, Some(closed), totals(3, 1)), &add).is_ok());
    assert!(
        check::add(&answer(Code::Applied, Some(closed), totals(2, 1)), &add).is_err(),
        "totals below what was added"
    );
    assert!(check::add(
        &answer(Code::Applied, Some(open_word()), totals(3, 1)),
        &add
    )
    .is_err());
}

#[test]
fn published_messages_are_checked() {
    let w = open_word().encode();
    let p = parse_published(
        format!("brk2|up#h%3A1|{w}|0|1700000030000|1700000000000|r-1|1|1700.5").as_bytes(),
    )
    .unwrap();
    assert_eq!(p.stored.word, open_word());
    assert_eq!(p.id.as_str(), "up#h%3A1");
    assert_eq!(p.stored.reason, TransitionReason::FailureRate);
    assert_eq!(&*p.epoch, "1700.5");
    for bad in [
        format!("brk1|a|{w}|0|1|1|r|1|e"),
        format!("brk2|a b|{w}|0|1|1|r|1|e"),
        format!("brk2|a|{w}|0|0|1|r|1|e"),
        format!("brk2|a|{w}|0|1|1|r|1|e|x"),
        format!("brk2|a|{w}|0|1|1|r|9|e"),
        "brk2|a|7|0|1|1|r|1|e".to_owned(),
        format!("brk2|a|{w}|0|1|1|r|1"),
    ] {
        assert!(parse_published(bad.as_bytes()).is_none(), "{bad}");
    }
    assert!(parse_published(b"\xff").is_none());
}

#[test]
fn reason_codes_round_trip_and_are_distinct() {
    let codes: Vec<u8> = TransitionReason::ALL.into_iter().map(reason_code).collect();
    assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 7]);
    for r in TransitionReason::ALL {
        assert_eq!(reason_of(reason_code(r)), Some(r));
    }
    assert_eq!(reason_of(8), None);
}

/// The script's limits come from the Rust constants: one bound for every argument.
#[test]
fn the_script_is_generated_with_the_rust_limits() {
    let lib = library();
    assert!(lib.starts_with("#!lua name=breaker_v2\nlocal MAX_MS, MAX_ITEMS, MAX_ID,"));
    assert!(lib.contains(&format!(
        "= {MAX_SAFE}, {MAX_ITEMS_PER_CALL}, {MAX_ID_LEN}, 128,"
    )));
    assert!(eval_script().contains("return dispatch(ARGV[1], KEYS, a)"));
    // The longest id a keyed breaker can have fits (issue 26 fault 3: 256 bytes of `é` made
    // an id longer than the script's limit).
    let id = BreakerId::keyed(&"n".repeat(128), &"é".repeat(128)).unwrap();
    assert!(id.as_str().len() <= MAX_ID_LEN, "{}", id.as_str().len());
    assert_eq!(MAX_ID_LEN, crate::names::MAX_ID_LEN);
}
