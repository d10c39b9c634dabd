//! Every alert has a runbook, and every runbook an alert: each `- alert:` in
//! `deploy/prometheus/rules.yml` carries a `runbook_url` naming `docs/runbooks/<alert>.md` on the
//! repository's main branch, that file exists and says how to confirm the alert, what to do
//! and what never to do; and no runbook is left for an alert that is gone.

use std::path::{Path, PathBuf};

/// Where the repository's files are published; alerts link there.
const RUNBOOKS_URL: &str = "https://github.com/safe-retries/payments/blob/main/docs/runbooks/";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each alert's name with the `runbook_url`s written under it, in the file's order.
fn alerts() -> Vec<(String, Vec<String>)> {
    let rules = std::fs::read_to_string(root().join("deploy/prometheus/rules.yml"))
        .expect("deploy/prometheus/rules.yml");
    let mut alerts: Vec<(String, Vec<String>)> = Vec::new();
    for line in rules.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert:") {
            alerts.push((name.trim().to_owned(), Vec::new()));
        } else if let Some(url) = line.strip_prefix("runbook_url:") {
            let (_, urls) = alerts.last_mut().expect("a runbook_url under an alert");
            urls.push(url.trim().trim_matches('"').to_owned());
        }
    }
    alerts
}

#[test]
fn every_alert_links_its_own_runbook_which_exists() {
    let alerts = alerts();
    assert!(alerts.len() >= 10, "the alerts were read: {alerts:?}");
    for (alert, urls) in &alerts {
        assert_eq!(
            urls,
            &[format!("{RUNBOOKS_URL}{alert}.md")],
            "{alert}: one runbook_url, its own runbook"
        );
        let runbook = root().join(format!("docs/runbooks/{alert}.md"));
        let text = std::fs::read_to_string(&runbook)
            .unwrap_or_else(|_| panic!("{alert}: docs/runbooks/{alert}.md is missing"));
        assert!(
            text.starts_with(&format!("# {alert}\n")),
            "{alert}: its title"
        );
        for section in ["## Confirm", "## Do", "## Never"] {
            assert!(text.contains(section), "{alert}: no `{section}` section");
        }
    }
}

#[test]
fn every_runbook_belongs_to_an_alert() {
    let alerts = alerts();
    for entry in std::fs::read_dir(root().join("docs/runbooks")).expect("docs/runbooks/") {
        let name = entry
            .expect("an entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let alert = name.strip_suffix(".md").unwrap_or(&name);
        assert!(
            alerts.iter().any(|(known, _)| known == alert),
            "docs/runbooks/{name} is for no alert in deploy/prometheus/rules.yml"
        );
    }
}
