//! The JSON Schema of a trace line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One line of a trace, as written in a file; see the [module docs](super) for what each
/// field means. This type is the source of the JSON Schema ([`json_schema`]); the reader
/// checks the same rules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "breaker trace line",
    description = "One call of a trace for `breaker simulate`, one JSON object per line: when it \
                   arrived, how long it took, how it ended. `outcome` may be left out when \
                   `status` is given.",
    extend("anyOf" = [{ "required": ["outcome"] }, { "required": ["status"] }])
)]
pub struct TraceLine {
    /// Arrival of the call, milliseconds since the trace's start.
    #[schemars(range(min = 0.0, max = 1e10))]
    pub t_ms: f64,
    /// How long the call took, milliseconds; for a `timeout`, when the caller gave up.
    #[schemars(range(min = 0.0, max = 1e10))]
    pub latency_ms: f64,
    /// What happened; may be left out when `status` is given (then the standard HTTP
    /// classification decides: 5xx, 408 and 429 are failures, other 4xx ignored, the rest
    /// successes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeName>,
    /// The HTTP status, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 599))]
    pub status: Option<u16>,
    /// The label of the trace's phase (`"healthy"`, `"hang"`); label every line or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// 1 (the default) for a call; above 1 for a retry the recording caller made, which the
    /// replay reads as the dependency's behaviour at `t_ms`, not as a call of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub attempt: Option<u16>,
}

/// The outcome of a call, as named in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeName {
    /// The dependency answered with a success.
    Success,
    /// The dependency answered with a failure, or the transport failed.
    Failure,
    /// The dependency answered with something neither success nor failure (a 404).
    Ignored,
    /// No answer within `latency_ms`.
    Timeout,
    /// Refused by the recording caller's breaker: the dependency was not called.
    Rejected,
    /// Dropped by the caller after `latency_ms`, with no answer.
    Cancelled,
}

/// The JSON Schema of a trace line, pretty-printed with a trailing newline: the committed
/// `breaker-sim/trace.schema.json`, and what `breaker trace schema` prints.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(TraceLine);
    let mut out = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    out.push('\n');
    out
}
