//! The backend's modules point one way (docs/code-map.md): no module depends, through any chain
//! of `use crate::…` or `super::…` references, on a module that depends on it. Read from the
//! source itself (tests and comments left out), at the level of top-level modules and of the
//! modules inside them (`store::claims`, `flows::rounds`, …); a parent and its own children may
//! refer to each other (a `mod.rs` declares and re-exports its children).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module as the check sees it: its path below `src`, at most two segments deep.
type Unit = String;

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The module path of a file (`store/claims/mod.rs` is `store::claims`), segment by segment.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file
        .strip_prefix(src)
        .expect("below src")
        .with_extension("");
    let mut segments: Vec<String> = relative
        .iter()
        .map(|segment| segment.to_string_lossy().into_owned())
        .collect();
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    segments
}

fn unit(segments: &[String]) -> Unit {
    segments
        .iter()
        .take(2)
        .cloned()
        .collect::<Vec<_>>()
        .join("::")
}

/// The code of a file without its tests and comment lines.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths referred to: `crate::a::b` as `[a, b]`, and `super::x` from `module` resolved.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| word.contains("::"))
        .collect();
    for word in words {
        let mut parts = word.split("::").filter(|part| !part.is_empty());
        let (mut base, first) = match parts.next() {
            Some("crate") => (Vec::new(), parts.next()),
            Some("super") => {
                let mut base = module.to_vec();
                base.pop();
                let mut next = parts.next();
                while next == Some("super") {
                    base.pop();
                    next = parts.next();
                }
                (base, next)
            }
            _ => continue,
        };
        if let Some(first) = first {
            base.push(first.to_owned());
            base.extend(parts.take(1).map(str::to_owned));
            found.push(base);
        }
    }
    found
}

fn is_ancestor(a: &Unit, b: &Unit) -> bool {
    b.starts_with(&format!("{a}::"))
}

#[test]
fn no_module_of_the_backend_depends_on_one_that_depends_on_it() {
    let src = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<Unit> = files
        .iter()
        .map(|file| unit(&module_of(&src, file)))
        .collect();
    let mut edges: BTreeMap<Unit, BTreeSet<Unit>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == ["lib"] || module == ["main"] {
            continue;
        }
        let from = unit(&module);
        let text = std::fs::read_to_string(file).expect("readable");
        for reference in references(&module, &code(&text)) {
            // The longest known module the reference names.
            let to = [unit(&reference), unit(&reference[..1])]
                .into_iter()
                .find(|candidate| modules.contains(candidate));
            let Some(to) = to else { continue };
            if to != from && !is_ancestor(&to, &from) && !is_ancestor(&from, &to) {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // A depth-first search for a cycle.
    fn visit(
        node: &Unit,
        edges: &BTreeMap<Unit, BTreeSet<Unit>>,
        done: &mut BTreeSet<Unit>,
        path: &mut Vec<Unit>,
    ) -> Option<Vec<Unit>> {
        if let Some(start) = path.iter().position(|on_path| on_path == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(cycle) = visit(node, &edges, &mut done, &mut Vec::new()) {
            panic!("modules depend on each other: {}", cycle.join(" -> "));
        }
    }
    assert!(edges.len() > 10, "the check read the modules: {edges:?}");
}
