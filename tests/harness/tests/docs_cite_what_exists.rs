//! The repository's prose cites only what exists: every `SPEC §N` (in Markdown and in code) is
//! a section of docs/SPEC.md, every file path a document names in backticks is in the
//! repository, and every relative Markdown link leads to a file, and to a heading of it when it
//! names one. What counts as a path: a backticked word that starts with one of the
//! repository's top-level folders or files and holds no placeholder (`{`, `*`, `…`, `<`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Folders that builds and set-up make and git ignores, which docs may name: the Worker's bundle
/// (`scripts/build-edge.sh`) and the npm tools (`scripts/setup-tools.sh`).
const BUILT: [&str; 2] = ["edge/build", "node_modules"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under the repository worth reading, skipping builds, dependencies and git.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading a folder") {
        let path = entry.expect("a folder entry").path();
        let name = path
            .file_name()
            .expect("an entry has a name")
            .to_string_lossy()
            .into_owned();
        if name.starts_with('.') || matches!(name.as_str(), "target" | "node_modules" | "data") {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn texts(extensions: &[&str]) -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    files(&root(), &mut all);
    all.into_iter()
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| extensions.contains(&ext.to_string_lossy().as_ref()))
        })
        .filter_map(|path| std::fs::read_to_string(&path).ok().map(|text| (path, text)))
        .collect()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The section numbers of docs/SPEC.md (`## 4. Requests and replies` is 4).
fn spec_sections() -> BTreeSet<u32> {
    let spec = std::fs::read_to_string(root().join("docs/SPEC.md")).expect("docs/SPEC.md");
    spec.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|heading| heading.split('.').next()?.parse().ok())
        .collect()
}

/// The numbers written after a `§` in `text`.
fn section_citations(text: &str) -> Vec<u32> {
    text.split('§')
        .skip(1)
        .filter_map(|after| {
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

#[test]
fn every_spec_section_cited_exists() {
    let sections = spec_sections();
    assert!(sections.len() >= 8, "found SPEC sections {sections:?}");
    let mut missing = Vec::new();
    for (path, text) in texts(&["md", "rs", "sh", "toml", "js", "html", "yaml", "sql"]) {
        if path.ends_with(file!().rsplit('/').next().expect("this file's name")) {
            continue; // this file's own examples
        }
        for section in section_citations(&text) {
            if !sections.contains(&section) {
                missing.push(format!("{}: §{section}", relative(&path)));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited SPEC sections that do not exist:\n{}",
        missing.join("\n")
    );
}

/// The backticked spans of a Markdown text, outside fenced code blocks.
fn backticked(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    spans
}

/// `span` as a repository path if it looks like one: it starts with a top-level entry and has
/// no placeholder; a `:line` suffix and a trailing `/` are dropped.
fn as_repository_path(span: &str, top_level: &BTreeSet<String>) -> Option<String> {
    if span.contains(['{', '*', '…', '<', ' ', '$', '=']) || span.starts_with('/') {
        return None;
    }
    let first = span.split('/').next()?;
    if !top_level.contains(first) || !span.contains('/') && !span.contains('.') {
        return None;
    }
    let without_line = span.split(':').next()?;
    Some(without_line.trim_end_matches('/').to_owned())
}

#[test]
fn every_file_the_docs_name_exists() {
    let top_level: BTreeSet<String> = std::fs::read_dir(root())
        .expect("the repository")
        .map(|entry| {
            entry
                .expect("a top-level entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| !name.starts_with('.') && name != "target" && name != "data")
        .collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (path, text) in texts(&["md"]) {
        for span in backticked(&text) {
            let Some(cited) = as_repository_path(&span, &top_level) else {
                continue;
            };
            checked += 1;
            let beside_the_doc = path.parent().expect("a file has a folder").join(&cited);
            let built = BUILT.iter().any(|output| cited.starts_with(output));
            if !root().join(&cited).exists() && !beside_the_doc.exists() && !built {
                missing.push(format!("{}: `{span}`", relative(&path)));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: is the pattern right?"
    );
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist:\n{}",
        missing.join("\n")
    );
}

/// The anchors GitHub gives the headings of a Markdown text.
fn anchors(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| {
            line.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|after| after.split(')').next())
        .map(|target| target.split_whitespace().next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut broken = Vec::new();
    for (path, text) in texts(&["md"]) {
        for target in link_targets(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if file.is_empty() {
                path.clone()
            } else {
                path.parent().expect("a file has a folder").join(file)
            };
            if !linked.exists() {
                broken.push(format!("{}: {target} (no such file)", relative(&path)));
                continue;
            }
            if anchor.is_empty() || linked.extension().is_none_or(|ext| ext != "md") {
                continue;
            }
            let linked_text = std::fs::read_to_string(&linked).unwrap_or_default();
            if !anchors(&linked_text).contains(anchor) {
                broken.push(format!("{}: {target} (no such heading)", relative(&path)));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that lead nowhere:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_patterns_find_what_they_should() {
    assert_eq!(
        section_citations("SPEC §4, §5 invariant 2 and §12"),
        vec![4, 5, 12]
    );
    let top: BTreeSet<String> = ["backend".to_owned(), "README.md".to_owned()].into();
    assert_eq!(
        as_repository_path("backend/src/main.rs:12", &top).as_deref(),
        Some("backend/src/main.rs")
    );
    assert_eq!(as_repository_path("backend/src/{a,b}.rs", &top), None);
    assert_eq!(as_repository_path("backend", &top), None);
    assert_eq!(
        as_repository_path("README.md", &top).as_deref(),
        Some("README.md")
    );
    assert!(
        anchors("## Two stores: PostgreSQL and `SQLite`")
            .contains("two-stores-postgresql-and-sqlite")
    );
    assert_eq!(
        link_targets("see [a](b.md#c) and [d](https://e)"),
        vec!["b.md#c", "https://e"]
    );
}
