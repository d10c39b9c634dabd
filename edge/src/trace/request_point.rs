//! The edge's count of its requests, as a plain value: one Workers Analytics Engine data point
//! per request, written to the dataset bound as [`REQUESTS_DATASET_BINDING`]
//! (`payments_edge_requests` in `wrangler.toml`). The Worker exports no Prometheus metrics: this
//! dataset is where the dashboard's edge panels read how many requests the edge refused, replayed
//! or forwarded, by status (`deploy/grafana/payments.json`, through the Analytics Engine SQL API).
//!
//! A point names how the request was handled, never who sent it: no user, key, token, address,
//! path parameter or body, so the dataset holds no payment data wherever it is stored.

use shared::Operation;

use super::EdgeHandling;

/// The binding name of the dataset (`[[analytics_engine_datasets]]` in `wrangler.toml`); a
/// Worker without it writes nothing.
pub const REQUESTS_DATASET_BINDING: &str = "EDGE_REQUESTS";

/// What each blob of a point holds, in order: the columns `blob1`… of the dataset.
pub const BLOB_COLUMNS: [&str; 4] = ["handling", "status", "method", "operation"];

/// The production dataset's name (`wrangler.toml`), which the dashboard's edge panels read.
pub const REQUESTS_DATASET: &str = "payments_edge_requests";

/// The `operation` blob of a request whose path names no operation.
pub const NO_OPERATION: &str = "other";

/// One request as the dataset stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPoint {
    /// The blobs, in the order [`BLOB_COLUMNS`] names them.
    pub blobs: [String; 4],
    /// The sampling index: the handling, so that rare refusals are sampled apart from the
    /// forwarded bulk.
    pub index: &'static str,
}

impl RequestPoint {
    /// The point of a request with `method`, to `operation` (if its path names one), handled as
    /// `handling` with reply `status`.
    pub fn new(
        handling: EdgeHandling,
        status: u16,
        method: &str,
        operation: Option<Operation>,
    ) -> RequestPoint {
        let method = match method {
            "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => method,
            _ => "other",
        };
        RequestPoint {
            blobs: [
                handling.as_str().to_owned(),
                status.to_string(),
                method.to_owned(),
                operation.map_or(NO_OPERATION, Operation::name).to_owned(),
            ],
            index: handling.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_names_the_handling_status_method_and_operation_only() {
        let point = RequestPoint::new(EdgeHandling::Refused, 409, "POST", Some(Operation::PayBill));
        assert_eq!(point.blobs, ["refused", "409", "POST", "pay_bill"]);
        assert_eq!(point.index, "refused");
    }

    /// The SQL of every target of `dashboard` that reads the edge's dataset.
    fn edge_queries(dashboard: &serde_json::Value, found: &mut Vec<String>) {
        match dashboard {
            serde_json::Value::Object(fields) => {
                let source = fields.get("datasource").map(|source| &source["uid"]);
                let edge = source.is_some_and(|uid| uid == "${edge_datasource}");
                match fields.get("query").and_then(|query| query.as_str()) {
                    Some(query) if edge && fields.contains_key("refId") => {
                        found.push(query.to_owned())
                    }
                    _ => fields.values().for_each(|field| edge_queries(field, found)),
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| edge_queries(i, found)),
            _ => {}
        }
    }

    #[test]
    fn the_dashboards_edge_panels_read_this_dataset_by_its_columns() {
        let text = include_str!("../../../deploy/grafana/payments.json");
        let dashboard: serde_json::Value = serde_json::from_str(text).expect("JSON");
        let mut queries = Vec::new();
        edge_queries(&dashboard, &mut queries);
        assert!(
            queries.len() >= 2,
            "the edge's panels were read: {queries:?}"
        );
        let handlings = [
            EdgeHandling::Forwarded,
            EdgeHandling::Replayed,
            EdgeHandling::Held,
            EdgeHandling::Refused,
            EdgeHandling::ForwardFailed,
            EdgeHandling::EdgeError,
        ]
        .map(EdgeHandling::as_str);
        for query in &queries {
            assert!(
                query.contains(&format!("FROM {REQUESTS_DATASET} ")),
                "{query}"
            );
            // The time picker's range (the Altinity plugin's macro), not a window of its own.
            assert!(
                query.contains("$timeFilterByColumn(timestamp)") && !query.contains("NOW()"),
                "{query}"
            );
            for (at, _) in query.match_indices("blob") {
                let digits: String = query[at + 4..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let column: usize = digits.parse().expect("blobN");
                assert!((1..=BLOB_COLUMNS.len()).contains(&column), "{query}");
            }
            for (at, _) in query.match_indices("blob1 = '") {
                let value = query[at + 9..].split('\'').next().unwrap_or_default();
                assert!(
                    handlings.contains(&value),
                    "{value} is no handling: {query}"
                );
            }
            for (at, _) in query.match_indices("blob4 != '") {
                let value = query[at + 10..].split('\'').next().unwrap_or_default();
                assert_eq!(value, NO_OPERATION, "{query}");
            }
        }
    }

    #[test]
    fn an_unusual_method_and_an_unguarded_path_are_grouped() {
        let point = RequestPoint::new(EdgeHandling::Forwarded, 200, "PROPFIND", None);
        assert_eq!(point.blobs, ["forwarded", "200", "other", "other"]);
    }
}
