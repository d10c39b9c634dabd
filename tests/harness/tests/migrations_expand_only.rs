//! Migrations expand, then contract one release later (docs/operations.md, "Upgrades"): a
//! migration the previous release (`deploy/previous-release`) did not ship may add tables,
//! columns, indexes and values, but may not change or take away what that release reads or
//! binds: no `ALTER COLUMN … TYPE`, `DROP COLUMN`, `DROP TABLE`, `RENAME`, or `SET NOT NULL`,
//! which would make the previous release's replicas fail while they still serve beside this
//! one. A contract step that the previous release no longer needs says so on a line of its own,
//! `-- contract: <why the previous release no longer reads it>`, and is let through. The
//! two-release run (`scripts/two-releases.sh`) proves the rest against the real binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Statements a migration beside a running previous release must not hold.
const CONTRACTING: [&str; 5] = [
    "alter column * type",
    "drop column",
    "drop table",
    "rename",
    "set not null",
];

/// The contracting statements in `sql` (comments left out), unless it is marked as a contract
/// step.
fn contracting_statements(sql: &str) -> Vec<&'static str> {
    if sql
        .lines()
        .any(|line| line.trim_start().starts_with("-- contract:"))
    {
        return Vec::new();
    }
    let code: String = sql
        .lines()
        .map(|line| line.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let words: Vec<&str> = code.split_whitespace().collect();
    let text = words.join(" ");
    CONTRACTING
        .into_iter()
        .filter(|pattern| match pattern.split_once(" * ") {
            Some((before, after)) => text.match_indices(before).any(|(at, _)| {
                let statement = text[at..].split(';').next().unwrap_or("");
                statement.contains(&format!(" {after} "))
            }),
            None => text.contains(pattern),
        })
        .collect()
}

/// The migration files the previous release shipped, by path from the repository root.
fn released_migrations() -> Vec<String> {
    let pinned = std::fs::read_to_string(root().join("deploy/previous-release"))
        .expect("deploy/previous-release");
    let commit = pinned
        .lines()
        .find(|line| !line.starts_with('#') && !line.trim().is_empty())
        .expect("a commit")
        .trim()
        .to_owned();
    let listed = Command::new("git")
        .current_dir(root())
        .args(["ls-tree", "-r", "--name-only", &commit, "--", "migrations"])
        .output()
        .expect("git ls-tree");
    assert!(
        listed.status.success(),
        "{commit} is not in this clone's history: {}",
        String::from_utf8_lossy(&listed.stderr)
    );
    String::from_utf8(listed.stdout)
        .expect("UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn migrations_here() -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["migrations", "migrations/sqlite"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("a migrations directory") {
            let name = entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".sql") {
                found.push(format!("{dir}/{name}"));
            }
        }
    }
    found
}

#[test]
fn migrations_since_the_previous_release_only_expand() {
    let released = released_migrations();
    assert!(released.len() > 10, "the released migrations were listed");
    for path in migrations_here() {
        if released.contains(&path) {
            continue;
        }
        let sql = std::fs::read_to_string(root().join(&path)).expect("a migration");
        let contracting = contracting_statements(&sql);
        assert!(
            contracting.is_empty(),
            "{path} holds {contracting:?}, which the previous release's replicas would fail \
             on during a rolling upgrade: expand now, contract one release later"
        );
    }
}

#[test]
fn the_check_finds_contracting_statements_and_lets_expansions_and_marked_contracts_through() {
    let compact_trail =
        "ALTER TABLE key_events\n  ALTER COLUMN event TYPE key_event USING event::key_event;";
    assert_eq!(
        contracting_statements(compact_trail),
        ["alter column * type"]
    );
    assert_eq!(
        contracting_statements("ALTER TABLE payments DROP COLUMN note;"),
        ["drop column"]
    );
    let expansion = "ALTER TABLE payments ADD COLUMN note text; -- rename later\n\
                     ALTER TABLE payments ALTER COLUMN note SET DEFAULT '';";
    assert!(contracting_statements(expansion).is_empty());
    let marked = "-- contract: 0.9 stopped reading note\nALTER TABLE payments DROP COLUMN note;";
    assert!(contracting_statements(marked).is_empty());
}
