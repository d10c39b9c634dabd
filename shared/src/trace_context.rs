//! A place in a W3C trace (Trace Context, <https://www.w3.org/TR/trace-context/>), read the same
//! at the edge and the backend: the trace id, taken from a well-formed `traceparent` the client
//! sent or minted, the id of the edge's own span, and the client's span as its parent. Every
//! forward to the backend carries [`TraceContext::traceparent`], so the backend's span is a
//! child of the edge's; the backend reads a request's trace id with [`trace_id_of`] (when its
//! exporter, which parses the header itself, is off) and records it in the audit trail.
//!
//! A header is accepted only as the recommendation reads it: `<version>-<trace id>-<parent
//! id>-<flags>` in lower-case hex, of 2, 32, 16 and 2 digits, neither id all zeros, version `ff`
//! refused; version `00` is exactly that, and a later version may add fields after another `-`.
//! Anything else starts a new trace, and a `tracestate` sent with it is dropped with it.

use std::fmt;

/// The header carrying the caller's trace and span.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// The header carrying vendors' trace data, passed on unchanged with an accepted `traceparent`.
pub const TRACESTATE_HEADER: &str = "tracestate";

/// The length of a version `00` header; a later version's fields begin the same way.
const TRACEPARENT_LENGTH: usize = 55;

/// A trace's id: 16 bytes, never all zeros; shown as 32 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

impl TraceId {
    /// The id of these bytes (all zeros, which no trace has, become a valid id).
    pub fn from_bytes(bytes: [u8; 16]) -> TraceId {
        TraceId(non_zero(bytes))
    }

    /// A new trace's id, from fresh random bytes.
    pub fn mint() -> TraceId {
        TraceId::from_bytes(uuid::Uuid::new_v4().into_bytes())
    }

    /// The 16 bytes (as the audit trail stores them).
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

/// The trace id of a well-formed `traceparent` header value, or `None`.
pub fn trace_id_of(traceparent: &str) -> Option<TraceId> {
    parse_traceparent(traceparent).map(|(trace_id, _)| trace_id)
}

/// A span's id: 8 bytes, never all zeros; shown as 16 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanId([u8; 8]);

/// Random bytes for the ids the edge mints (the runtime draws them).
#[derive(Debug, Clone, Copy)]
pub struct FreshIds {
    /// The trace id of a new trace, used when no `traceparent` is accepted.
    pub trace_id: [u8; 16],
    /// The id of the edge's span.
    pub span_id: [u8; 8],
}

/// The trace headers a request came with.
#[derive(Debug, Clone, Copy, Default)]
pub struct IncomingTrace<'a> {
    /// Its `traceparent`, if any.
    pub traceparent: Option<&'a str>,
    /// Its `tracestate`, if any.
    pub tracestate: Option<&'a str>,
}

/// The edge's span in its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: TraceId,
    span_id: SpanId,
    /// The client's span, when its `traceparent` was accepted.
    parent_id: Option<SpanId>,
    /// The client's `tracestate`, kept only with its accepted `traceparent`.
    tracestate: Option<String>,
}

impl TraceContext {
    /// Joins the client's trace if its `traceparent` is well formed, or starts a new one with
    /// `fresh.trace_id`; the edge's span gets `fresh.span_id` either way.
    pub fn start(incoming: IncomingTrace<'_>, fresh: FreshIds) -> TraceContext {
        let span_id = SpanId(non_zero(fresh.span_id));
        match incoming.traceparent.and_then(parse_traceparent) {
            Some((trace_id, parent_id)) => TraceContext {
                trace_id,
                span_id,
                parent_id: Some(parent_id),
                tracestate: incoming
                    .tracestate
                    .filter(|state| !state.is_empty())
                    .map(str::to_owned),
            },
            None => TraceContext {
                trace_id: TraceId(non_zero(fresh.trace_id)),
                span_id,
                parent_id: None,
                tracestate: None,
            },
        }
    }

    /// The trace the request belongs to.
    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    /// The edge's span.
    pub fn span_id(&self) -> SpanId {
        self.span_id
    }

    /// The client's span, the parent of the edge's, if the client sent one.
    pub fn parent_id(&self) -> Option<SpanId> {
        self.parent_id
    }

    /// The `traceparent` the backend gets: this trace, the edge's span as the parent, sampled.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }

    /// The `tracestate` the backend gets: the client's, unchanged, when its trace was joined.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

/// The trace id and parent id of a well-formed `traceparent`.
fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId)> {
    let fields = value.get(..TRACEPARENT_LENGTH)?;
    let more = value.get(TRACEPARENT_LENGTH..)?;
    let [version, trace_id, parent_id, flags] = fields.split('-').collect::<Vec<_>>()[..] else {
        return None;
    };
    let version: [u8; 1] = lower_hex(version)?;
    let version_fits = match version {
        [0x00] => more.is_empty(),
        [0xff] => false,
        _ => more.is_empty() || more.starts_with('-'),
    };
    let _flags: [u8; 1] = lower_hex(flags)?;
    let trace_id: [u8; 16] = lower_hex(trace_id)?;
    let parent_id: [u8; 8] = lower_hex(parent_id)?;
    let ids_set = trace_id != [0; 16] && parent_id != [0; 8];
    (version_fits && ids_set).then_some((TraceId(trace_id), SpanId(parent_id)))
}

/// The bytes of exactly `2 * N` lower-case hex digits.
fn lower_hex<const N: usize>(digits: &str) -> Option<[u8; N]> {
    let digit = |byte: u8| match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        _ => None,
    };
    let digits = digits.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut bytes = [0; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(bytes)
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
}

/// `bytes`, unless they are all zeros (an invalid id): then the last bit is set.
fn non_zero<const N: usize>(mut bytes: [u8; N]) -> [u8; N] {
    if bytes == [0; N] {
        bytes[N - 1] = 1;
    }
    bytes
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT: &str = "00f067aa0ba902b7";
    const FRESH: FreshIds = FreshIds {
        trace_id: [0xab; 16],
        span_id: [0x0c; 8],
    };

    fn started(traceparent: &str, tracestate: Option<&str>) -> TraceContext {
        let incoming = IncomingTrace {
            traceparent: Some(traceparent),
            tracestate,
        };
        TraceContext::start(incoming, FRESH)
    }

    #[test]
    fn a_well_formed_traceparent_is_joined_with_the_edges_span_as_the_backends_parent() {
        let trace = started(&format!("00-{TRACE}-{PARENT}-00"), Some("vendor=opaque"));
        assert_eq!(trace.trace_id().to_string(), TRACE);
        assert_eq!(
            trace.parent_id().map(|id| id.to_string()).as_deref(),
            Some(PARENT)
        );
        assert_eq!(trace.span_id().to_string(), "0c0c0c0c0c0c0c0c");
        assert_eq!(
            trace.traceparent(),
            format!("00-{TRACE}-0c0c0c0c0c0c0c0c-01")
        );
        assert_eq!(trace.tracestate(), Some("vendor=opaque"));
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        for header in [
            format!("cc-{TRACE}-{PARENT}-01"),
            format!("cc-{TRACE}-{PARENT}-01-what-the-future-adds"),
        ] {
            let trace = started(&header, None);
            assert_eq!(trace.trace_id().to_string(), TRACE, "{header}");
        }
    }

    #[test]
    fn every_malformed_traceparent_starts_a_new_trace_and_drops_the_tracestate() {
        let zeros_trace = "0".repeat(32);
        for header in [
            String::new(),
            "garbage".to_owned(),
            format!("00-{zeros_trace}-{PARENT}-01"),
            format!("00-{TRACE}-0000000000000000-01"),
            format!("ff-{TRACE}-{PARENT}-01"),
            format!("00-{}-{PARENT}-01", TRACE.to_uppercase()),
            format!("00-{TRACE}-{}-01", PARENT.to_uppercase()),
            format!("0-{TRACE}-{PARENT}-01"),
            format!("00-{TRACE}-{PARENT}"),
            format!("00-{TRACE}-{PARENT}-1"),
            format!("00-{TRACE}-{PARENT}-0x"),
            format!("00-{TRACE}-{PARENT}-01-extra"),
            format!("00-{TRACE}-{PARENT}-01 "),
            format!("cc-{TRACE}-{PARENT}-01.extra"),
            format!("00_{TRACE}_{PARENT}_01"),
            format!("00-{}-{PARENT}-01", &TRACE[..31]),
            format!("00-{TRACE}-{PARENT}-01,00-{TRACE}-{PARENT}-01"),
            format!("00-{}é-{PARENT}-01", &TRACE[..30]),
        ] {
            let trace = started(&header, Some("vendor=opaque"));
            assert_eq!(trace.trace_id(), TraceId(FRESH.trace_id), "{header:?}");
            assert_eq!(trace.parent_id(), None, "{header:?}");
            assert_eq!(trace.tracestate(), None, "{header:?}");
        }
        let without = TraceContext::start(IncomingTrace::default(), FRESH);
        assert_eq!(without.trace_id().to_string(), "ab".repeat(16));
        assert_eq!(without.parent_id(), None);
    }

    #[test]
    fn minted_ids_are_lower_case_hex_of_their_length_and_never_all_zeros() {
        let fresh = FreshIds {
            trace_id: [0; 16],
            span_id: [0; 8],
        };
        let trace = TraceContext::start(IncomingTrace::default(), fresh);
        assert_eq!(
            trace.trace_id().to_string(),
            format!("{}01", "0".repeat(30))
        );
        assert_eq!(trace.span_id().to_string(), "0000000000000001");
        let fresh = FreshIds {
            trace_id: *b"\x01\x23\x45\x67\x89\xab\xcd\xef\xfe\xdc\xba\x98\x76\x54\x32\x10",
            span_id: [0xff, 0xee, 0, 1, 2, 3, 4, 0x5a],
        };
        let trace = TraceContext::start(IncomingTrace::default(), fresh);
        assert_eq!(
            trace.traceparent(),
            "00-0123456789abcdeffedcba9876543210-ffee00010203045a-01"
        );
    }

    #[test]
    fn an_empty_tracestate_is_not_passed_on() {
        let trace = started(&format!("00-{TRACE}-{PARENT}-01"), Some(""));
        assert_eq!(trace.tracestate(), None);
    }

    #[test]
    fn the_backend_reads_the_trace_id_and_keeps_its_bytes() {
        let id = trace_id_of(&format!("00-{TRACE}-{PARENT}-01")).expect("well formed");
        assert_eq!(id.to_string(), TRACE);
        assert_eq!(TraceId::from_bytes(id.to_bytes()), id);
        assert_eq!(trace_id_of("00-garbage"), None);
        let mut low = [0_u8; 16];
        low[15] = 7;
        assert_eq!(
            TraceId::from_bytes(low).to_string(),
            format!("{}7", "0".repeat(31))
        );
        assert_ne!(TraceId::mint(), TraceId::mint());
    }
}
