//! Compiles the policy into the Worker: parses the repository's `policy.yaml` (through
//! `shared::policy::DEFAULT_POLICY_YAML`, with the same `shared` parser the backend uses) and
//! writes the checked value out as Rust code (`$OUT_DIR/compiled_policy.rs`).
//!
//! An invalid file stops the build, the Worker's start-up, with the message naming the field
//! (SPEC §3). Parsing here rather than in the Worker also keeps the YAML parser out of the Wasm
//! module, about a third of its size.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=../policy.yaml");
    let policy = match shared::Policy::from_yaml(shared::policy::DEFAULT_POLICY_YAML) {
        Ok(policy) => policy,
        Err(error) => {
            println!("cargo::error=policy.yaml: {error}");
            return;
        }
    };
    let mut operations = String::new();
    for operation in &policy.required_for {
        let _ = write!(operations, "shared::Operation::{operation:?}, ");
    }
    let checks = &policy.status_checks;
    let mut quiet_hours = String::new();
    for window in &checks.quiet_hours {
        let _ = write!(
            quiet_hours,
            "shared::status_checks::QuietWindow {{ starts: {}, ends: {} }}, ",
            window.starts, window.ends
        );
    }
    let code = format!(
        "/// The policy of `policy.yaml`, checked and written out by `edge/build.rs`.\n\
         fn policy_from_build() -> shared::Policy {{\n\
         \x20   shared::Policy {{\n\
         \x20       header: {header:?}.to_owned(),\n\
         \x20       required_for: vec![{operations}],\n\
         \x20       key_format: shared::KeyFormat::{key_format:?},\n\
         \x20       keep_keys_for: std::time::Duration::from_secs({keep}),\n\
         \x20       stuck_after: std::time::Duration::from_secs({stuck}),\n\
         \x20       max_wait: std::time::Duration::from_secs({max_wait}),\n\
         \x20       status_checks: shared::status_checks::StatusCheckRules {{\n\
         \x20           first_after: std::time::Duration::from_secs({first_after}),\n\
         \x20           at_most: {at_most},\n\
         \x20           within: std::time::Duration::from_secs({within}),\n\
         \x20           per_second: {per_second},\n\
         \x20           quiet_hours: vec![{quiet_hours}],\n\
         \x20           quiet_hours_zone: {zone:?}.to_owned(),\n\
         \x20       }},\n\
         \x20   }}\n\
         }}\n",
        header = policy.header,
        key_format = policy.key_format,
        keep = policy.keep_keys_for.as_secs(),
        stuck = policy.stuck_after.as_secs(),
        max_wait = policy.max_wait.as_secs(),
        first_after = checks.first_after.as_secs(),
        at_most = checks.at_most,
        within = checks.within.as_secs(),
        per_second = checks.per_second,
        zone = checks.quiet_hours_zone,
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    if let Err(error) = std::fs::write(out_dir.join("compiled_policy.rs"), code) {
        println!("cargo::error=cannot write the compiled policy: {error}");
    }
}
