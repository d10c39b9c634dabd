//! For the tests that keep generated documents true to the code (docs/configuration.md's
//! settings, docs/metrics.md's metrics): [`check_section`] compares the part of a document
//! between two markers with what the code generates now, and rewrites it under `UPDATE_DOCS=1`.

/// Passes if the text of `path` (relative to the backend crate) between `start` and `end` is
/// `generated`; rewrites it if `UPDATE_DOCS` is set; else fails naming `update_with`.
pub fn check_section(path: &str, (start, end): (&str, &str), generated: &str, update_with: &str) {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{path}"));
    let from = docs.find(start).expect("the section's start marker") + start.len();
    let to = docs.find(end).expect("the section's end marker");
    let generated = format!("\n{generated}");
    if docs[from..to] == generated {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{generated}{}", &docs[..from], &docs[to..]);
        std::fs::write(&path, updated).unwrap_or_else(|_| panic!("rewriting {path}"));
        return;
    }
    panic!("{path} differs from the code; rewrite it with {update_with}");
}
