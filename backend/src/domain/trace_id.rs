//! A request's trace id: the W3C trace context's 16 bytes, the same in the logs, the exported
//! spans (`crate::telemetry::traces`) and the audit trail, so one id finds all three.

use std::fmt;

/// A trace id: 16 bytes, never all zero, written as 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";

impl TraceId {
    /// The id of these bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> TraceId {
        TraceId(bytes)
    }

    /// A fresh id, for a request that came without a trace.
    pub fn mint() -> TraceId {
        TraceId(uuid::Uuid::new_v4().into_bytes())
    }

    /// The trace id of a well-formed `traceparent` header's `value`
    /// (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase, ids not all zero, version not `ff`).
    pub fn of_traceparent(value: &str) -> Option<TraceId> {
        let parts: Vec<&str> = value.split('-').collect();
        let lower_hex = |part: &str, length: usize| {
            part.len() == length && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let not_zero = |part: &str| part.bytes().any(|b| b != b'0');
        let well_formed = parts.len() == 4
            && lower_hex(parts[0], 2)
            && parts[0] != "ff"
            && lower_hex(parts[1], 32)
            && lower_hex(parts[2], 16)
            && lower_hex(parts[3], 2)
            && not_zero(parts[1])
            && not_zero(parts[2]);
        if !well_formed {
            return None;
        }
        u128::from_str_radix(parts[1], 16)
            .ok()
            .map(|id| TraceId(id.to_be_bytes()))
    }

    /// The 16 bytes, as the trail stores them.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", u128::from_be_bytes(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> Option<TraceId> {
        TraceId::of_traceparent(value)
    }

    #[test]
    fn a_well_formed_traceparent_gives_its_trace_id_and_anything_else_none() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let id = with(&format!("00-{trace}-00f067aa0ba902b7-01")).expect("well formed");
        assert_eq!(id.to_string(), trace);
        for refused in [
            format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32)),
            format!("00-{trace}-{}-01", "0".repeat(16)),
            format!("ff-{trace}-00f067aa0ba902b7-01"),
            format!("00-{}-00f067aa0ba902b7-01", trace.to_uppercase()),
            format!("00-{trace}-00f067aa0ba902b7"),
            "garbage".to_owned(),
        ] {
            assert_eq!(with(&refused), None, "{refused}");
        }
    }

    #[test]
    fn ids_are_written_as_32_hex_digits_leading_zeros_kept() {
        let mut bytes = [0_u8; 16];
        bytes[15] = 1;
        assert_eq!(
            TraceId::from_bytes(bytes).to_string(),
            format!("{}1", "0".repeat(31))
        );
        assert_ne!(TraceId::mint(), TraceId::mint());
    }
}
