//! The list of every metric, kept by the calls that register them: docs/metrics.md is generated
//! from it (a test fails when the two differ), and the Prometheus rules in `deploy/prometheus/`
//! are checked against it ([`unknown_metrics`]), so the docs, the alerts and the code cannot
//! drift apart.

use super::Metrics;

/// One metric as the registry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricEntry {
    /// The name as exported, without the suffixes the encoder adds to series.
    pub name: String,
    /// `counter`, `gauge`, `histogram` or `info`.
    pub kind: String,
    /// Its meaning.
    pub help: String,
}

impl MetricEntry {
    /// The names of the series a query may use for it: a counter's `_total`, a histogram's
    /// `_bucket`, `_sum` and `_count`, a gauge's own name.
    pub fn series_names(&self) -> Vec<String> {
        match self.kind.as_str() {
            "counter" => vec![format!("{}_total", self.name)],
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|suffix| format!("{}{suffix}", self.name))
                .collect(),
            _ => vec![self.name.clone()],
        }
    }
}

/// Every metric a fresh registry holds, in its order.
pub fn metric_list() -> Vec<MetricEntry> {
    Metrics::new().list().to_vec()
}

/// docs/metrics.md's table; a histogram by its name (its series add `_bucket`, `_sum`, `_count`).
pub fn metric_table() -> String {
    let mut table = String::from("| metric | type | meaning |\n|---|---|---|\n");
    for entry in metric_list() {
        let series = match entry.kind.as_str() {
            "histogram" => entry.name.clone(),
            _ => entry.series_names().join("`, `"),
        };
        table.push_str(&format!(
            "| `{series}` | {} | {} |\n",
            entry.kind, entry.help
        ));
    }
    table
}

/// PromQL's words that are not metric names (aggregations may take `by (...)` before their
/// parenthesis).
const PROMQL_WORDS: [&str; 26] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "le",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
];

/// The metric names a PromQL expression uses that neither the registry (`known` series names)
/// nor the rules' own recordings (`recorded`) define. Function calls, label matchers
/// (`{...}`), grouping labels (`by (...)`), ranges (`[5m]`), strings and numbers are skipped.
pub fn unknown_metrics(expression: &str, known: &[String], recorded: &[String]) -> Vec<String> {
    let mut unknown = Vec::new();
    let text = without_enclosed(expression);
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let starts_name = bytes[at].is_ascii_alphabetic() || bytes[at] == b'_' || bytes[at] == b':';
        let after_digit = at > 0 && (bytes[at - 1].is_ascii_digit() || bytes[at - 1] == b'.');
        if !starts_name || after_digit {
            at += 1;
            continue;
        }
        let end = text[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(text.len(), |length| at + length);
        let word = &text[at..end];
        let calls = text[end..].trim_start().starts_with('(');
        let grouping = matches!(word, "by" | "without" | "on" | "ignoring");
        if !calls
            && !grouping
            && !PROMQL_WORDS.contains(&word.to_ascii_lowercase().as_str())
            && !known.iter().any(|name| name == word)
            && !recorded.iter().any(|name| name == word)
            && !unknown.iter().any(|name| name == word)
        {
            unknown.push(word.to_owned());
        }
        at = end;
    }
    unknown
}

/// `expression` with label matchers, ranges, strings and the label lists after `by`,
/// `without`, `on` and `ignoring` blanked out.
fn without_enclosed(expression: &str) -> String {
    let mut text = String::with_capacity(expression.len());
    // What closes each enclosing open: a string inside a label matcher may hold `}`.
    let mut closing: Vec<char> = Vec::new();
    for c in expression.chars() {
        if let Some(&close) = closing.last() {
            if c == close {
                closing.pop();
            } else if c == '"' {
                closing.push('"');
            }
            // A grouping list's `)` is kept, so a `(` right after a `by (...)` list is not
            // read as a second grouping list.
            text.push(if c == ')' && closing.is_empty() {
                c
            } else {
                ' '
            });
            continue;
        }
        match c {
            '{' => closing.push('}'),
            '[' => closing.push(']'),
            '"' => closing.push('"'),
            '(' if ends_with_grouping(&text) => closing.push(')'),
            _ => {}
        }
        text.push(if closing.is_empty() { c } else { ' ' });
    }
    text
}

fn ends_with_grouping(text: &str) -> bool {
    let word = text
        .trim_end()
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    matches!(
        word,
        "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metric_docs_are_the_registry() {
        crate::generated_docs::check_section(
            "../docs/metrics.md",
            (
                "<!-- metric list: generated -->",
                "<!-- end of metric list -->",
            ),
            &metric_table(),
            "UPDATE_DOCS=1 cargo test -p backend --lib metrics::list",
        );
    }

    #[test]
    fn every_metric_has_a_type_and_a_meaning_and_base_units() {
        for entry in metric_list() {
            assert!(
                !entry.kind.is_empty() && !entry.help.is_empty(),
                "{entry:?}"
            );
            for unit in ["_ms", "_milliseconds", "_minutes"] {
                assert!(
                    !entry.name.contains(unit),
                    "{}: not a base unit",
                    entry.name
                );
            }
        }
    }

    fn known() -> Vec<String> {
        metric_list()
            .iter()
            .flat_map(MetricEntry::series_names)
            .collect()
    }

    #[test]
    fn names_in_a_query_are_found_and_checked() {
        let query = r#"histogram_quantile(0.99, sum by (le, route) (rate(payments_http_request_duration_seconds_bucket{route="/v1/bills/{bill_id}/pay"}[5m]))) > 2.5"#;
        assert_eq!(unknown_metrics(query, &known(), &[]), Vec::<String>::new());
        let misspelt = "sum(rate(bank_calls_totl{outcome=\"unknown\"}[5m])) / sum(rate(payments_bank_calls_total[5m]))";
        assert_eq!(
            unknown_metrics(misspelt, &known(), &[]),
            ["bank_calls_totl"]
        );
        let recorded = ["job:bank_error_ratio:rate5m".to_owned()];
        let uses_recording = "job:bank_error_ratio:rate5m > 0.05 and on (instance) up == 1";
        assert_eq!(unknown_metrics(uses_recording, &known(), &recorded), ["up"]);
        let after_grouping = "sum by (le) (rate(bank_call_duraton_seconds_bucket[5m]))";
        assert_eq!(
            unknown_metrics(after_grouping, &known(), &[]),
            ["bank_call_duraton_seconds_bucket"]
        );
    }

    const RULES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/prometheus/rules.yml"
    );

    const DASHBOARD: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/grafana/payments.json"
    );

    fn rules_field(line: &str, field: &str) -> Option<String> {
        let line = line.trim_start().trim_start_matches("- ");
        line.strip_prefix(field).map(|rest| rest.trim().to_owned())
    }

    /// The rules' recordings, and Prometheus's own `up` for each scrape target.
    fn recorded() -> Vec<String> {
        let rules = std::fs::read_to_string(RULES).expect("deploy/prometheus/rules.yml");
        let mut recorded: Vec<String> = rules
            .lines()
            .filter_map(|l| rules_field(l, "record:"))
            .collect();
        recorded.push("up".to_owned());
        recorded
    }

    /// Every `expr` anywhere in a Grafana dashboard (panels' targets, rows, templating).
    fn dashboard_expressions(value: &serde_json::Value, found: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(fields) => {
                for (name, field) in fields {
                    match field.as_str() {
                        Some(expr) if name == "expr" => found.push(expr.to_owned()),
                        _ => dashboard_expressions(field, found),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                items
                    .iter()
                    .for_each(|item| dashboard_expressions(item, found));
            }
            _ => {}
        }
    }

    #[test]
    fn every_metric_the_dashboard_queries_exists() {
        let dashboard = std::fs::read_to_string(DASHBOARD).expect("deploy/grafana/payments.json");
        let dashboard: serde_json::Value = serde_json::from_str(&dashboard).expect("JSON");
        let mut expressions = Vec::new();
        dashboard_expressions(&dashboard, &mut expressions);
        assert!(expressions.len() >= 20, "the panels' queries were read");
        for expression in &expressions {
            let unknown = unknown_metrics(expression, &known(), &recorded());
            assert!(
                unknown.is_empty(),
                "{unknown:?} in `{expression}` are not metrics"
            );
        }
    }

    #[test]
    fn every_metric_the_prometheus_rules_name_exists() {
        let rules = std::fs::read_to_string(RULES).expect("deploy/prometheus/rules.yml");
        let recorded = recorded();
        let expressions: Vec<String> = rules
            .lines()
            .filter_map(|l| rules_field(l, "expr:"))
            .collect();
        assert!(expressions.len() >= 10, "the rules' expressions were read");
        for expression in &expressions {
            assert!(
                !expression.starts_with(['|', '>']),
                "keep each expr on one line, so this check reads it: {expression}"
            );
            let unknown = unknown_metrics(expression, &known(), &recorded);
            assert!(
                unknown.is_empty(),
                "{unknown:?} in `{expression}` are not metrics"
            );
        }
    }
}
