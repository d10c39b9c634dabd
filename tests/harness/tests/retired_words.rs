//! One word per concept (issue 47): the glossary at the top of docs/design.md is the single list
//! of words, and the words it replaced stay out of the code, the wire and the docs. This test
//! reads every source and document in the repository and fails, naming `file:line`, on:
//!
//! - **answer** in any case, inside identifiers too (`LastAnswer`, `no_answer`, "answered"):
//!   what a client gets, and what the bank sends back, is a *reply*;
//! - **`resource_id`, `resource_ids`, `resourceId`** outside SQL: a payment or refund is a
//!   *movement* (`movement_id`);
//! - **`…Outcome` types** other than the bank's final word on a movement: what the edge's
//!   objects say is a *verdict*, how the edge came to its reply a *handling*.
//!
//! The few words kept on purpose are listed below, each with its reason: names the database
//! stores (renaming a column or a stored event would break the previous release during a rolling
//! upgrade) and the key status's deprecated `answer`, which clients already deployed read.
//! Skipped: `migrations/` (sqlx checksums the applied ones), `CHANGELOG.md` (history), lockfiles,
//! builds and dependencies, and this file (its own patterns and examples).

use std::path::{Path, PathBuf};

/// The file types read: code, documents, data and configuration.
const EXTENSIONS: [&str; 15] = [
    "rs", "ts", "md", "yaml", "yml", "json", "sql", "sh", "js", "mjs", "html", "css", "toml", "py",
    "lua",
];

/// Folders never read: builds, dependencies, local data, and the migrations already applied.
const SKIPPED_FOLDERS: [&str; 6] = [
    "target",
    "node_modules",
    "data",
    "build",
    "dist",
    "migrations",
];

/// Files never read.
const SKIPPED_FILES: [&str; 3] = ["CHANGELOG.md", "Cargo.lock", "package-lock.json"];

/// Names the database stores, kept wherever they are cited.
const STORED_NAMES: [(&str, &str); 3] = [
    (
        "answer_event_id",
        "a payments column (migration 20261207000001), written by the previous release too",
    ),
    (
        "bank_answered",
        "a stored event name, in key_events' CHECK list, the trail view and the operator API",
    ),
    (
        "bank_answer_unknown",
        "the same, for a call with no final reply",
    ),
];

/// Where the key status's deprecated `answer` (and the edge's old `answered` tag) may appear.
const ANSWER_ALIAS: [(&str, &str); 9] = [
    (
        "shared/src/api/key_status.rs",
        "sent beside `reply` with the same bytes, and read when a body has no `reply`",
    ),
    (
        "backend/src/http/openapi.rs",
        "the published document lists it, deprecated",
    ),
    (
        "backend/tests/contract/key_status.rs",
        "checks the server still sends it",
    ),
    (
        "clients/typescript/src/keyState.ts",
        "the TypeScript reader falls back to it",
    ),
    (
        "clients/typescript/test/keyState.test.ts",
        "tests that fallback",
    ),
    ("docs/SPEC.md", "says until when it is sent"),
    ("docs/api.md", "names it beside `reply`"),
    (
        "edge/src/coordination/protocol.rs",
        "messages of the previous version's Worker and objects are still read",
    ),
    (
        "edge/src/coordination/record.rs",
        "records the previous version stored are read until they expire",
    ),
];

/// Where the column's name `resource_id` may appear outside SQL strings (OpenTelemetry's own
/// `resource`, `resourceSpans` and `with_resource` are other words and never match).
const MOVEMENT_COLUMN: [(&str, &str); 2] = [
    (
        "backend/src/store/sql/key_row.rs",
        "the key row's column list, read by name",
    ),
    (
        "docs/design.md",
        "the glossary and the key row's decision name the column",
    ),
];

/// The `…Outcome` types that are the bank's final word on a movement.
const BANK_OUTCOMES: [(&str, &str); 7] = [
    (
        "FinalOutcome",
        "the bank's final word: succeeded, declined or void",
    ),
    ("CallOutcome", "what the bank port makes of one call"),
    ("DebitOutcome", "the bank's word on a debit, in bank-api"),
    ("RefundOutcome", "the same for a refund"),
    (
        "OutcomePending",
        "the bank's final word not known yet (SPEC §4)",
    ),
    (
        "OutcomeAwaitingSettlement",
        "not known after every check the rail allows",
    ),
    (
        "OutcomeLabels",
        "the metric labels whose `outcome` is the bank's word",
    ),
];

/// A retired word found, with where.
#[derive(Debug, PartialEq, Eq)]
struct Finding {
    line: usize,
    word: String,
}

/// Byte ranges of `text` (Rust) that are SQL: string literals holding a statement or a column
/// list, and the column name a row is read by (`get("…")`, `try_get("…")`).
fn sql_in_rust(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut sql = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &text[at..];
        if rest.starts_with("//") {
            at += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            at += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if let Some((open, close)) =
            raw_string_start(rest).filter(|_| word_boundary(text, at))
        {
            let end = rest[open..]
                .find(&close)
                .map_or(rest.len(), |end| open + end + close.len());
            if is_sql(text, at, &rest[open..end]) {
                sql.push((at, at + end));
            }
            at += end;
        } else if bytes[at] == b'"' {
            let mut end = 1;
            while end < rest.len() && rest.as_bytes()[end] != b'"' {
                end += if rest.as_bytes()[end] == b'\\' { 2 } else { 1 };
            }
            let end = (end + 1).min(rest.len());
            if is_sql(text, at, &rest[..end]) {
                sql.push((at, at + end));
            }
            at += end;
        } else if bytes[at] == b'\'' {
            // A character literal ('"' included) is skipped whole; a lifetime is one byte.
            at += char_literal_length(rest).unwrap_or(1);
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    sql
}

/// `r"`, `r#"`, `br##"`…: how long the opening is and the closing it needs.
fn raw_string_start(rest: &str) -> Option<(usize, String)> {
    let after_b = rest.strip_prefix('b').unwrap_or(rest);
    let after_r = after_b.strip_prefix('r')?;
    let hashes = after_r.chars().take_while(|c| *c == '#').count();
    after_r[hashes..].starts_with('"').then(|| {
        let open = rest.len() - after_r.len() + hashes + 1;
        (open, format!("\"{}", "#".repeat(hashes)))
    })
}

fn word_boundary(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
}

fn char_literal_length(rest: &str) -> Option<usize> {
    let mut chars = rest.char_indices().skip(1);
    let (_, first) = chars.next()?;
    let (end, _) = if first == '\\' {
        chars.find(|(_, c)| *c == '\'')?
    } else {
        chars.next().filter(|(_, c)| *c == '\'')?
    };
    Some(end + 1)
}

/// Words only SQL says (in capitals, as this repository writes it).
const SQL_KEYWORDS: [&str; 8] = [
    "SELECT ",
    "INSERT ",
    "UPDATE ",
    "DELETE ",
    "RETURNING ",
    "WHERE ",
    " JOIN ",
    "AND ",
];

/// Byte ranges of the lines of `text` (a script) that hold SQL.
fn sql_lines(text: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if SQL_KEYWORDS.iter().any(|keyword| line.contains(keyword)) {
            ranges.push((start, start + line.len()));
        }
        start += line.len();
    }
    ranges
}

/// Whether the literal `literal`, starting at `at` in `text`, is SQL.
fn is_sql(text: &str, at: usize, literal: &str) -> bool {
    let read_by_name = ["get(", "try_get("]
        .iter()
        .any(|call| text[..at].trim_end().ends_with(call));
    let column_list = literal.contains(", ")
        && literal
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || " ,_.\\\n\"".contains(c));
    read_by_name || column_list || SQL_KEYWORDS.iter().any(|keyword| literal.contains(keyword))
}

fn allowed_in(path: &str, list: &[(&str, &str)]) -> bool {
    list.iter().any(|(file, _)| path == *file)
}

/// The retired words of `text`, the file at `path` (relative to the repository).
fn scan(path: &str, text: &str) -> Vec<Finding> {
    let sql = if path.ends_with(".rs") {
        sql_in_rust(text)
    } else if path.ends_with(".sql") {
        vec![(0, text.len())]
    } else if [".sh", ".py", ".js", ".mjs", ".lua"]
        .iter()
        .any(|script| path.ends_with(script))
    {
        sql_lines(text)
    } else {
        Vec::new()
    };
    let in_sql = |at: usize| sql.iter().any(|(start, end)| (*start..*end).contains(&at));
    let mut found = Vec::new();
    let mut at = 0;
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let start = at;
        at += word.len()
            + text[at + word.len()..]
                .chars()
                .next()
                .map_or(0, char::len_utf8);
        if word.is_empty() {
            continue;
        }
        let retired = if word.to_lowercase().contains("answer") {
            let stored = STORED_NAMES.iter().any(|(name, _)| word == *name);
            let alias = matches!(word, "answer" | "answered") && allowed_in(path, &ANSWER_ALIAS);
            !stored && !alias
        } else if matches!(word, "resource_id" | "resource_ids" | "resourceId") {
            !in_sql(start) && !allowed_in(path, &MOVEMENT_COLUMN)
        } else if word.contains("Outcome") {
            let a_type = word != "Outcome" || text[start + word.len()..].starts_with("::");
            a_type && !BANK_OUTCOMES.iter().any(|(name, _)| word == *name)
        } else {
            false
        };
        if retired {
            let line = text[..start].matches('\n').count() + 1;
            found.push(Finding {
                line,
                word: word.to_owned(),
            });
        }
    }
    found
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file read, relative to the repository.
fn files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("reading a folder") {
        let path = entry.expect("a folder entry").path();
        let name = path
            .file_name()
            .expect("an entry has a name")
            .to_string_lossy()
            .into_owned();
        if name.starts_with('.') {
            continue;
        }
        let relative = path
            .strip_prefix(root())
            .expect("under the repository")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            if !SKIPPED_FOLDERS.contains(&name.as_str()) {
                files(&path, out);
            }
        } else if !SKIPPED_FILES.contains(&name.as_str())
            && !relative.ends_with(file!().rsplit('/').next().expect("this file's name"))
            && path
                .extension()
                .is_some_and(|ext| EXTENSIONS.contains(&ext.to_string_lossy().as_ref()))
        {
            out.push(relative);
        }
    }
}

#[test]
fn no_retired_word_is_left() {
    let mut all = Vec::new();
    files(&root(), &mut all);
    assert!(all.len() > 300, "only {} files read", all.len());
    let mut found = Vec::new();
    for path in all {
        let Ok(text) = std::fs::read_to_string(root().join(&path)) else {
            continue;
        };
        for finding in scan(&path, &text) {
            found.push(format!("{path}:{}: {}", finding.line, finding.word));
        }
    }
    assert!(
        found.is_empty(),
        "retired words (docs/design.md's glossary says which word to use; the kept ones are \
         listed in {}):\n{}",
        file!(),
        found.join("\n")
    );
}

#[test]
fn the_scanner_reports_what_it_should() {
    let text = "/// The bank's answer.\n\
                fn read(row: &Row) -> Uuid {\n\
                \x20   let resource_id = row.get(\"resource_id\");\n\
                \x20   sqlx::query(\"SELECT resource_id FROM idempotency_keys\");\n\
                \x20   json!({\"resource_id\": resource_id, \"event\": \"bank_answered\"});\n\
                \x20   let c = '\"'; let NoAnswer = BeginOutcome::Forward; FinalOutcome::Void\n\
                }\n";
    let found: Vec<(usize, String)> = scan("backend/src/example.rs", text)
        .into_iter()
        .map(|finding| (finding.line, finding.word))
        .collect();
    let found: Vec<(usize, &str)> = found
        .iter()
        .map(|(line, word)| (*line, word.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (1, "answer"),
            (3, "resource_id"),
            (5, "resource_id"),
            (5, "resource_id"),
            (6, "NoAnswer"),
            (6, "BeginOutcome"),
        ]
    );
    // The alias only where it is listed; SQL files and OpenTelemetry's resource never count.
    assert!(
        scan(
            "shared/src/api/key_status.rs",
            "answer: Option<Box<RawValue>>,"
        )
        .is_empty()
    );
    assert_eq!(scan("shared/src/other.rs", "answer: Option<Raw>,").len(), 1);
    assert!(scan("bench/x.sql", "SELECT resource_id FROM k;").is_empty());
    assert!(scan("bench/x.sh", "psql -c \"UPDATE k SET resource_id = 1\"").is_empty());
    assert_eq!(scan("bench/x.sh", "echo resource_id").len(), 1);
    assert!(
        scan(
            "edge/src/trace/otlp.rs",
            "resourceSpans resource with_resource"
        )
        .is_empty()
    );
    assert_eq!(scan("docs/x.md", "An Answered `resourceId`").len(), 2);
}
