//! Bad trace lines are errors that name the file, the line and what was expected; nothing is
//! skipped.

use breaker_sim::replay::{NamedPolicy, Options};
use breaker_sim::trace::{Format, TraceReader, REORDER_WINDOW};

fn error(text: &str, format: Format) -> String {
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        let mut reader = TraceReader::new(
            "calls.jsonl",
            Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
            format,
        )?;
        let policy = NamedPolicy::from_breaker_dsl("3 consecutive").unwrap();
        breaker_sim::run::run(&mut reader, &[policy], Options::default(), &|_| {})?;
        Ok(())
    };
    run().expect_err("the trace is bad").to_string()
}

const GOOD: &str = r#"{"t_ms": 0, "latency_ms": 1, "outcome": "success"}"#;

#[test]
fn each_bad_line_is_an_error_with_its_line_number() {
    let cases = [
        (
            r#"{"t_ms": 5, "latency_ms": 1, "outcome": "failed"}"#,
            "calls.jsonl:3: unknown `outcome` `failed`; expected one of `success`, `failure`, \
             `ignored`, `timeout`, `rejected`, `cancelled`",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1}"#,
            "calls.jsonl:3: neither `outcome` nor `status` is given; one of them is required",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": -1, "outcome": "success"}"#,
            "calls.jsonl:3: `latency_ms` must be a number of milliseconds in 0..=10000000000, got -1",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1, "status": 700}"#,
            "calls.jsonl:3: `status` must be an HTTP status in 100..=599, got 700",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1, "outcome": "success", "attempt": 0}"#,
            "calls.jsonl:3: `attempt` must be at least 1, got 0",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1, "outcome": "success", "latency": 3}"#,
            "calls.jsonl:3: unknown field `latency`, expected one of `t_ms`, `latency_ms`, \
             `outcome`, `status`, `phase`, `attempt` (column 60); expected a trace line such as \
             {\"t_ms\": 1520.0, \"latency_ms\": 38.5, \"outcome\": \"failure\", \"status\": 503}",
        ),
        (
            r#"{"latency_ms": 1, "outcome": "success"}"#,
            "calls.jsonl:3: missing field `t_ms` (column 39); expected a trace line such as \
             {\"t_ms\": 1520.0, \"latency_ms\": 38.5, \"outcome\": \"failure\", \"status\": 503}",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1, "outcome": "success""#,
            "calls.jsonl:3: EOF while parsing an object (column 49); expected a trace line such \
             as {\"t_ms\": 1520.0, \"latency_ms\": 38.5, \"outcome\": \"failure\", \"status\": 503}",
        ),
        (
            r#"{"t_ms": "5", "latency_ms": 1, "outcome": "success"}"#,
            "calls.jsonl:3: invalid type: string \"5\", expected `t_ms`, a number of milliseconds \
             (column 12); expected a trace line such as {\"t_ms\": 1520.0, \"latency_ms\": 38.5, \
             \"outcome\": \"failure\", \"status\": 503}",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1, "status": 70000}"#,
            "calls.jsonl:3: invalid value: integer `70000`, expected `status`, an HTTP status such \
             as 503 (column 44); expected a trace line such as {\"t_ms\": 1520.0, \"latency_ms\": \
             38.5, \"outcome\": \"failure\", \"status\": 503}",
        ),
        (
            r#"{"t_ms": 5, "latency_ms": 1, "outcome": "success", "phase": "late"}"#,
            "calls.jsonl:3: `phase` is set, but the trace's first call has none: label every \
             line's phase or none",
        ),
    ];
    for (bad, want) in cases {
        // Line 2 is blank: blank lines are allowed and counted.
        let text = format!("{GOOD}\n\n{bad}\n{GOOD}\n");
        assert_eq!(error(&text, Format::JsonLines), want, "for {bad}");
    }
}

#[test]
fn csv_errors_name_the_row_and_column() {
    assert_eq!(
        error(
            "t_ms,latency_ms,outcome\n0,1,success\n5,x,success\n",
            Format::Csv
        ),
        "calls.jsonl:3: `latency_ms` (column 2): invalid float literal `x`"
    );
    assert_eq!(
        error("t_ms,latency,outcome\n0,1,success\n", Format::Csv),
        "calls.jsonl:1: unknown column `latency` (column 2); expected `t_ms`, `latency_ms`, \
         `outcome`, `status`, `phase`, `attempt`"
    );
}

/// A labelled trace labels every line: a line without a `phase` after labelled ones is an error,
/// as a labelled line in an unlabelled trace is.
#[test]
fn a_line_without_a_phase_in_a_labelled_trace_is_an_error() {
    let labelled = r#"{"t_ms": 0, "latency_ms": 1, "outcome": "success", "phase": "healthy"}"#;
    let text = format!("{labelled}\n{GOOD_LATER}\n{labelled}\n");
    assert_eq!(
        error(&text, Format::JsonLines),
        "calls.jsonl:2: `phase` is missing, but the trace's first call has one: label every \
         line's phase or none"
    );
}

const GOOD_LATER: &str = r#"{"t_ms": 5, "latency_ms": 1, "outcome": "success"}"#;

#[test]
fn lines_out_of_order_are_put_back_within_the_window_and_refused_beyond_it() {
    // A little out of order: fine, replayed in arrival order.
    let text = "{\"t_ms\": 10, \"latency_ms\": 1, \"outcome\": \"failure\"}\n\
                {\"t_ms\": 0, \"latency_ms\": 1, \"outcome\": \"failure\"}\n";
    let mut reader = TraceReader::new(
        "t",
        Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        Format::JsonLines,
    )
    .unwrap();
    assert_eq!(reader.next_call().unwrap().unwrap().t_ns, 0);
    assert_eq!(reader.next_call().unwrap().unwrap().t_ns, 10_000_000);
    // A line arriving more than the window's worth of lines late.
    let mut text = String::new();
    for i in 0..=REORDER_WINDOW + 1 {
        text.push_str(&format!(
            "{{\"t_ms\": {}, \"latency_ms\": 1, \"outcome\": \"success\"}}\n",
            1000 + i
        ));
    }
    text.push_str("{\"t_ms\": 999, \"latency_ms\": 1, \"outcome\": \"success\"}\n");
    let line = REORDER_WINDOW + 3;
    assert_eq!(
        error(&text, Format::JsonLines),
        format!(
            "calls.jsonl:{line}: `t_ms` 999 is earlier than `t_ms` 1001 of line 2, which is already \
             replayed: lines may be out of arrival order by at most {REORDER_WINDOW} lines; sort \
             the trace by `t_ms`"
        )
    );
}

#[test]
fn the_committed_schema_matches_the_types() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/trace.schema.json")).unwrap();
    assert!(
        committed == breaker_sim::trace::json_schema(),
        "breaker-sim/trace.schema.json is stale; regenerate it with `cargo run --features cli \
         --bin breaker -- trace schema > breaker-sim/trace.schema.json`"
    );
}
