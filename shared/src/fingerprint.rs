//! The request fingerprint: what makes two attempts "the same request".
//!
//! `SHA-256(operation name ‖ method ‖ route template ‖ path parameter ‖ canonical body)`, each
//! part length-prefixed so no two different inputs can run together into one byte string. The
//! body is put in RFC 8785 canonical JSON first, so key order, white space and equivalent number
//! spellings (`1.0`, `1`, `1e0`) never make a false mismatch, while any real change of a value
//! does. (As RFC 8785 says, numbers are compared as IEEE doubles: integers beyond ±2^53 that
//! round to the same double are one value. Every amount we accept is far below that.) The path parameter is included beyond SPEC's "method and route": paying bill B with
//! the key used for bill A has the same route template and body, and must be a mismatch (422),
//! never a replay of bill A's receipt.
//!
//! Hostile bodies are refused before any parsing work: more than [`BodyLimits::max_bytes`] bytes
//! (413), or nesting deeper than [`BodyLimits::max_depth`] (400), which a single pass over the
//! bytes detects without recursion.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::operation::Operation;

/// A SHA-256 digest of an operation and its canonical body: 32 bytes (a `bytea` column). In
/// JSON it is an array of its 32 bytes as numbers, as serde writes a `[u8; 32]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Fingerprint([u8; 32]);

/// Limits applied to a request body before it is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// The largest body accepted, in bytes.
    pub max_bytes: usize,
    /// The deepest nesting of arrays and objects accepted.
    pub max_depth: usize,
}

impl Default for BodyLimits {
    /// 16 KiB and 16 levels: a payment body is under 200 bytes and 1 level deep.
    fn default() -> Self {
        BodyLimits {
            max_bytes: 16 * 1024,
            max_depth: 16,
        }
    }
}

/// Why a body could not be fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BodyError {
    /// The body is larger than the limit (413).
    #[error("the request body is {length} bytes; at most {limit} are accepted")]
    TooLarge {
        /// The body's length.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// Arrays and objects nest deeper than the limit.
    #[error("the request body nests deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The body is not JSON (or not UTF-8).
    #[error("the request body is not valid JSON: {reason}")]
    NotJson {
        /// The parser's message, with line and column.
        reason: String,
    },
}

/// A body that passed the limits, parsed, with its fingerprint.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedBody {
    /// The parsed JSON value, for field validation.
    pub value: serde_json::Value,
    /// The fingerprint of the operation and this body.
    pub fingerprint: Fingerprint,
}

/// Checks the limits, parses the body and fingerprints it with the operation and path parameter.
pub fn fingerprint(
    operation: Operation,
    path_parameter: &str,
    body: &[u8],
    limits: BodyLimits,
) -> Result<CheckedBody, BodyError> {
    let value = parse_within_limits(body, limits)?;
    let canonical = canonical_json(&value);
    let fingerprint = Fingerprint::of_parts(&[
        operation.name().as_bytes(),
        operation.method().as_bytes(),
        operation.route_template().as_bytes(),
        path_parameter.as_bytes(),
        &canonical,
    ]);
    Ok(CheckedBody { value, fingerprint })
}

/// Checks size and depth, then parses. The checks run first so hostile input costs one scan.
pub fn parse_within_limits(
    body: &[u8],
    limits: BodyLimits,
) -> Result<serde_json::Value, BodyError> {
    if body.len() > limits.max_bytes {
        return Err(BodyError::TooLarge {
            length: body.len(),
            limit: limits.max_bytes,
        });
    }
    if nesting_depth(body) > limits.max_depth {
        return Err(BodyError::TooDeep {
            limit: limits.max_depth,
        });
    }
    serde_json::from_slice(body).map_err(|error| BodyError::NotJson {
        reason: error.to_string(),
    })
}

/// RFC 8785 canonical form of a JSON value: sorted keys, no white space, ECMAScript numbers.
pub fn canonical_json(value: &serde_json::Value) -> Vec<u8> {
    // serde_jcs only fails on non-string map keys, which a `serde_json::Value` cannot hold.
    serde_jcs::to_vec(value).expect("a JSON value always canonicalises")
}

/// The deepest nesting of `[`/`{` outside strings. Malformed input is left to the parser.
fn nesting_depth(body: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in body {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// SHA-256 of length-prefixed parts, so that no two lists of parts run together into one.
fn digest_of_parts(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// A digest of a request as sent: its operation, its path parameter and its body's bytes as
/// they are, before any parsing. Equal digests mean the same bytes, hence the same
/// [`Fingerprint`]; unequal ones mean nothing (the same JSON may be spelt another way). The
/// backend's replay cache uses it to know a repeat's bytes again without parsing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentBytes([u8; 32]);

impl SentBytes {
    /// The digest of `body` sent to `operation` at `path_parameter`.
    pub fn of(operation: Operation, path_parameter: &str, body: &[u8]) -> SentBytes {
        SentBytes(digest_of_parts(&[
            operation.name().as_bytes(),
            path_parameter.as_bytes(),
            body,
        ]))
    }
}

impl Fingerprint {
    /// Hashes length-prefixed parts.
    fn of_parts(parts: &[&[u8]]) -> Fingerprint {
        Fingerprint(digest_of_parts(parts))
    }

    /// The 32 digest bytes, for storage.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Rebuilds a fingerprint read back from storage; `None` unless exactly 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Fingerprint> {
        bytes.try_into().ok().map(Fingerprint)
    }
}

/// Reads what the derived `Serialize` writes, as `#[derive(Deserialize)]` would, with a loop
/// over the 32 bytes: serde's `[u8; 32]` reads them in 32 unrolled steps, which cost the edge's
/// Wasm module about 2 KB gzipped.
impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct("Fingerprint", FingerprintVisitor)
    }
}

/// Visits the newtype [`Fingerprint`], then its array of bytes.
struct FingerprintVisitor;

impl<'de> Visitor<'de> for FingerprintVisitor {
    type Value = Fingerprint;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an array of length 32")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, inner: D) -> Result<Fingerprint, D::Error> {
        inner.deserialize_tuple(32, self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut bytes: A) -> Result<Fingerprint, A::Error> {
        let mut digest = [0u8; 32];
        for (index, byte) in digest.iter_mut().enumerate() {
            *byte = bytes
                .next_element()?
                .ok_or_else(|| de::Error::invalid_length(index, &self))?;
        }
        Ok(Fingerprint(digest))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn sent_bytes_differ_with_the_operation_the_path_or_any_byte_of_the_body() {
        let body = br#"{"amount_paise":100}"#;
        let sent = SentBytes::of(Operation::PayBill, "BILL-1", body);
        assert_eq!(sent, SentBytes::of(Operation::PayBill, "BILL-1", body));
        let others = [
            SentBytes::of(Operation::RefundPayment, "BILL-1", body),
            SentBytes::of(Operation::PayBill, "BILL-2", body),
            SentBytes::of(Operation::PayBill, "BILL-1", br#"{"amount_paise":101}"#),
            // The same JSON spelt another way is other bytes: checked in full.
            SentBytes::of(Operation::PayBill, "BILL-1", br#"{ "amount_paise": 100 }"#),
            // The path's end and the body's start cannot trade bytes.
            SentBytes::of(Operation::PayBill, "BILL-1{", &body[1..]),
        ];
        for other in others {
            assert_ne!(sent, other);
        }
    }

    fn fp(body: &str) -> Fingerprint {
        fingerprint(
            Operation::PayBill,
            "bill-1",
            body.as_bytes(),
            BodyLimits::default(),
        )
        .expect("valid body")
        .fingerprint
    }

    #[test]
    fn key_order_and_white_space_do_not_change_the_fingerprint() {
        assert_eq!(
            fp(r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#),
            fp("{ \"payer_vpa\" : \"asha@okbank\",\n  \"amount_paise\" : 230000 }")
        );
    }

    #[test]
    fn equivalent_number_spellings_do_not_change_the_fingerprint() {
        let plain = fp(r#"{"amount_paise":230000}"#);
        assert_eq!(plain, fp(r#"{"amount_paise":230000.0}"#));
        assert_eq!(plain, fp(r#"{"amount_paise":2.3e5}"#));
        assert_eq!(plain, fp(r#"{"amount_paise":23E4}"#));
    }

    #[test]
    fn a_changed_amount_changes_the_fingerprint() {
        assert_ne!(
            fp(r#"{"amount_paise":230000}"#),
            fp(r#"{"amount_paise":230001}"#)
        );
    }

    #[test]
    fn operation_and_path_parameter_are_part_of_the_fingerprint() {
        let body = br#"{"amount_paise":500}"#;
        let limits = BodyLimits::default();
        let pay = fingerprint(Operation::PayBill, "7", body, limits).expect("ok");
        let refund = fingerprint(Operation::RefundPayment, "7", body, limits).expect("ok");
        let other_bill = fingerprint(Operation::PayBill, "8", body, limits).expect("ok");
        assert_ne!(pay.fingerprint, refund.fingerprint);
        assert_ne!(pay.fingerprint, other_bill.fingerprint);
    }

    #[test]
    fn ten_thousand_levels_of_nesting_are_refused_without_recursion() {
        let body = "[".repeat(10_000) + &"]".repeat(10_000);
        let roomy = BodyLimits {
            max_bytes: 1 << 20,
            ..BodyLimits::default()
        };
        assert_eq!(
            fingerprint(Operation::PayBill, "b", body.as_bytes(), roomy),
            Err(BodyError::TooDeep { limit: 16 })
        );
    }

    #[test]
    fn brackets_inside_strings_do_not_count_as_nesting() {
        let body = format!(r#"{{"note":"{}"}}"#, "[{".repeat(100));
        assert!(
            fingerprint(
                Operation::PayBill,
                "b",
                body.as_bytes(),
                BodyLimits::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn oversized_body_is_refused_before_parsing() {
        let body = vec![b' '; 10 * 1024 * 1024];
        assert_eq!(
            fingerprint(Operation::PayBill, "b", &body, BodyLimits::default()),
            Err(BodyError::TooLarge {
                length: 10 * 1024 * 1024,
                limit: 16 * 1024
            })
        );
    }

    #[test]
    fn non_json_and_invalid_utf8_are_refused() {
        for body in [
            &b"amount=5"[..],
            &b"{\"a\":"[..],
            &[0xff, 0xfe][..],
            &b""[..],
        ] {
            let error = fingerprint(Operation::PayBill, "b", body, BodyLimits::default())
                .expect_err("must be refused");
            assert!(matches!(error, BodyError::NotJson { .. }), "{error:?}");
        }
    }

    #[test]
    fn fingerprint_round_trips_through_bytes() {
        let original = fp("{}");
        assert_eq!(Fingerprint::from_slice(original.as_bytes()), Some(original));
        assert_eq!(Fingerprint::from_slice(&[0; 31]), None);
        assert_eq!(original.to_string().len(), 64);
    }

    #[test]
    fn fingerprint_json_is_the_array_of_its_32_bytes_and_reads_back() {
        let original = fp("{}");
        let json = serde_json::to_string(&original).expect("serialises");
        let bytes: Vec<u8> = serde_json::from_str(&json).expect("an array of numbers");
        assert_eq!(bytes, original.as_bytes());
        assert_eq!(
            serde_json::from_str::<Fingerprint>(&json).expect("parses"),
            original
        );
        let value = serde_json::to_value(original).expect("serialises");
        assert_eq!(
            serde_json::from_value::<Fingerprint>(value).expect("parses"),
            original
        );
        for wrong in [
            "[]",
            "[1,2,3]",
            &format!("[{}]", ["0"; 33].join(",")),
            "\"ab\"",
            "[256]",
        ] {
            assert!(
                serde_json::from_str::<Fingerprint>(wrong).is_err(),
                "{wrong}"
            );
        }
    }

    /// Property tests, native only (proptest does not run under wasm-bindgen-test).
    #[cfg(not(target_arch = "wasm32"))]
    mod properties {
        use super::*;
        use proptest::prelude::*;
        use serde_json::{Map, Value, json};

        /// Small JSON values: enough shapes to exercise sorting, nesting and number forms.
        fn json_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                // RFC 8785 reads every number as an IEEE double, so integers beyond ±2^53 that
                // round to one double are one value; amounts are capped far below that.
                (-(1i64 << 53)..(1i64 << 53)).prop_map(|n| json!(n)),
                (-1.0e9f64..1.0e9).prop_map(|f| json!(f)),
                "[a-z€\"\\\\ ]{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::btree_map("[a-z]{1,6}", inner, 0..5)
                        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
                ]
            })
        }

        /// Serialises an object with its members in reverse order, recursively.
        fn reversed_json(value: &Value) -> String {
            match value {
                Value::Object(map) => {
                    let members: Vec<String> = map
                        .iter()
                        .rev()
                        .map(|(k, v)| format!("{} : {}", json!(k), reversed_json(v)))
                        .collect();
                    format!("{{ {} }}", members.join(" , "))
                }
                Value::Array(items) => {
                    let items: Vec<String> = items.iter().map(reversed_json).collect();
                    format!("[\n{}\n]", items.join(",\n"))
                }
                other => other.to_string(),
            }
        }

        /// Changes one leaf value somewhere in the tree (the first one found).
        fn change_one_leaf(value: &mut Value) -> bool {
            match value {
                Value::Object(map) => map.values_mut().any(change_one_leaf),
                Value::Array(items) => items.iter_mut().any(change_one_leaf),
                Value::Null => {
                    *value = json!(0);
                    true
                }
                Value::Bool(b) => {
                    *b = !*b;
                    true
                }
                Value::Number(n) => {
                    *value = match n.as_i64() {
                        Some(i) => json!(if i > 0 { i - 1 } else { i + 1 }),
                        None => json!(n.as_f64().unwrap_or(0.0) + 1.0),
                    };
                    true
                }
                Value::String(s) => {
                    s.push('x');
                    true
                }
            }
        }

        proptest! {
            #[test]
            fn member_order_and_layout_never_change_the_fingerprint(value in json_value()) {
                let compact = serde_json::to_string(&value).expect("serialisable");
                prop_assert_eq!(fp(&compact), fp(&reversed_json(&value)));
            }

            #[test]
            fn any_changed_value_changes_the_fingerprint(value in json_value()) {
                let mut changed = value.clone();
                prop_assume!(change_one_leaf(&mut changed));
                let before = serde_json::to_string(&value).expect("serialisable");
                let after = serde_json::to_string(&changed).expect("serialisable");
                prop_assert_ne!(fp(&before), fp(&after));
            }

            #[test]
            fn an_added_member_changes_the_fingerprint(value in json_value(), name in "[A-Z]{1,4}") {
                let wrapped = json!({ "body": value });
                let mut extended = wrapped.clone();
                extended.as_object_mut().expect("object").insert(name, Value::Null);
                prop_assert_ne!(fp(&wrapped.to_string()), fp(&extended.to_string()));
            }
        }
    }
}
