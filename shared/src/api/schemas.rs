//! The JSON Schemas (2020-12, as OpenAPI 3.1 uses) of the API's bodies, derived from the types
//! that build and read them, so the published document cannot describe a body the code does not
//! send or accept. The backend's OpenAPI document (`backend/src/http/openapi.rs`) places them
//! under `components.schemas`; built only with the `schemas` feature, which the Worker's Wasm
//! build leaves off.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

use super::{
    KeyStatusResponse, MAX_AMOUNT_PAISE, Paise, PayBillRequest, PaymentResponse,
    PaymentWithRefunds, RefundRequest, RefundResponse,
};
use crate::problem::{Problem, ProblemKind};

/// A UPI address as `payer_vpa`'s check accepts it: a name of `A-Z a-z 0-9 . _ -` and a handle
/// of letters and digits (the length, 255 at most, is the schema's `maxLength`).
pub(super) const VPA_PATTERN: &str = "^[A-Za-z0-9._-]+@[A-Za-z0-9]+$";

/// Every body schema, by its published name, with its `$ref`s pointing into
/// `#/components/schemas/`: the requests, the replies and the problem.
pub fn body_schemas() -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|settings| {
        settings.definitions_path = Cow::Borrowed("/components/schemas");
        settings.meta_schema = None;
    });
    let mut generator = SchemaGenerator::new(settings);
    generator.subschema_for::<PayBillRequest>();
    generator.subschema_for::<RefundRequest>();
    generator.subschema_for::<PaymentWithRefunds>();
    generator.subschema_for::<KeyStatusResponse>();
    generator.subschema_for::<Problem>();
    generator.take_definitions(true)
}

/// `Problem.type`: one of the problem kinds' type URIs.
pub fn problem_type_schema(_: &mut SchemaGenerator) -> Schema {
    let types: Vec<String> = ProblemKind::ALL
        .iter()
        .map(|kind| kind.type_uri())
        .collect();
    json_schema!({ "type": "string", "enum": types })
}

/// A saved reply's body: the payment or refund, or the decline problem.
pub(super) fn saved_reply(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({ "oneOf": [
        generator.subschema_for::<PaymentResponse>(),
        generator.subschema_for::<RefundResponse>(),
        generator.subschema_for::<Problem>(),
    ] })
}

impl JsonSchema for Paise {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Paise")
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "integer", "minimum": 1, "maximum": MAX_AMOUNT_PAISE,
            "description": "Whole paise; never a float",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_body_is_published_under_its_name() {
        let schemas = body_schemas();
        let mut names: Vec<&str> = schemas.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "KeyStatus",
                "MovementStatus",
                "Operation",
                "PayBillRequest",
                "Payment",
                "PaymentWithRefunds",
                "Problem",
                "Refund",
                "RefundRequest"
            ]
        );
    }
}
