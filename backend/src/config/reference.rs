//! The configuration reference (docs/configuration.md), generated from the settings
//! themselves: the clap definitions of [`Settings`] (each flag's environment variable, default
//! and doc comment) and [`SECRET_SETTINGS`], the settings that are never flags. One source: a
//! test fails when the docs differ, and `UPDATE_DOCS=1 cargo test -p backend --lib
//! config::reference` rewrites the table.

use clap::{Args, Command};

use super::bank::{CALLBACK_SECRET_SETTING, PREVIOUS_CALLBACK_SECRET_SETTING};
use super::{DATABASE_URL_SETTING, DEFAULT_DATABASE_URL, Settings};
use crate::identity::OPERATOR_SECRET_SETTING;
use shared::auth::JWT_SECRET_SETTING;
use shared::edge_proof::{PREVIOUS_PROOF_SECRET_SETTING, PROOF_SECRET_SETTING};

/// A setting read only from the environment or a mounted file ([`secret_settings`]).
pub struct SecretSetting {
    /// The environment variable (`{name}_FILE` names a file holding the value instead).
    pub name: &'static str,
    /// What applies when it is unset.
    pub default: &'static str,
    /// What it means.
    pub meaning: &'static str,
}

/// The settings that hold secrets, in the order the table lists them.
pub const SECRET_SETTINGS: [SecretSetting; 7] = [
    SecretSetting {
        name: DATABASE_URL_SETTING,
        default: DEFAULT_DATABASE_URL,
        meaning: "where keys and payments live: `postgres://…` for PostgreSQL (production; \
                  required for more than one replica), or `sqlite://PATH` for an embedded \
                  SQLite file (created if missing; one process only)",
    },
    SecretSetting {
        name: JWT_SECRET_SETTING,
        default: "a development default (refused in production) when no `AUTH_JWKS_URL`",
        meaning: "HS256 secret of customers' bearer tokens, at least 32 bytes; not with \
                  `AUTH_JWKS_URL`, whose provider's keys sign them instead",
    },
    SecretSetting {
        name: OPERATOR_SECRET_SETTING,
        default: "a development default in development; unset in production: operators' tokens \
                  come from `OPERATOR_JWKS_URL` or `AUTH_JWKS_URL`, or the operator API is closed",
        meaning: "HS256 secret of operator tokens (the console), at least 32 bytes, never the \
                  same as `AUTH_JWT_SECRET`; not with `OPERATOR_JWKS_URL`",
    },
    SecretSetting {
        name: PROOF_SECRET_SETTING,
        default: "unset; required in production unless `REQUIRE_EDGE_PROOF=false`",
        meaning: "the key of the edge's proof on `/v1` requests (the edge's secret of the same \
                  name), at least 32 bytes",
    },
    SecretSetting {
        name: PREVIOUS_PROOF_SECRET_SETTING,
        default: "unset",
        meaning: "while the edge's proof secret rotates (docs/identity.md): the one the edge \
                  signed with before, also accepted",
    },
    SecretSetting {
        name: CALLBACK_SECRET_SETTING,
        default: "unset: the admin listener's `POST /bank/callbacks` is closed (404)",
        meaning: "the secret the bank signs its callbacks with (SPEC §7), at least 32 bytes",
    },
    SecretSetting {
        name: PREVIOUS_CALLBACK_SECRET_SETTING,
        default: "unset",
        meaning: "while the bank rotates its callback secret: the one it signed with before, \
                  also accepted; only beside `BANK_CALLBACK_SECRET`",
    },
];

/// Where the generated table starts and ends in docs/configuration.md.
pub const TABLE_START: &str = "<!-- generated from backend/src/config: start -->";
/// See [`TABLE_START`].
pub const TABLE_END: &str = "<!-- generated from backend/src/config: end -->";

/// The backend's settings as a Markdown table: variable, flag, default, meaning.
pub fn settings_table() -> String {
    let mut table = String::from("| variable | flag | default | meaning |\n|---|---|---|---|\n");
    for secret in &SECRET_SETTINGS {
        table.push_str(&row(
            &format!("`{0}` (or `{0}_FILE`)", secret.name),
            "never a flag",
            secret.default,
            secret.meaning,
        ));
    }
    let command = Settings::augment_args(Command::new("backend"));
    for arg in command.get_arguments() {
        let Some(variable) = arg.get_env() else {
            continue;
        };
        let flag = arg
            .get_long()
            .map(|long| format!("`--{long}`"))
            .unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|value| format!("`{}`", value.to_string_lossy()))
            .collect();
        let default = if defaults.is_empty() {
            "unset".to_owned()
        } else {
            defaults.join(", ")
        };
        let meaning = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|help| help.to_string())
            .unwrap_or_default();
        table.push_str(&row(
            &format!("`{}`", variable.to_string_lossy()),
            &flag,
            &default,
            &meaning,
        ));
    }
    table
}

/// One table row, with `|` escaped and line breaks folded so a cell stays one cell.
fn row(variable: &str, flag: &str, default: &str, meaning: &str) -> String {
    let cell = |text: &str| {
        text.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|")
    };
    format!(
        "| {} | {} | {} | {} |\n",
        cell(variable),
        cell(flag),
        cell(default),
        cell(meaning)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_docs_are_the_settings_table() {
        crate::generated_docs::check_section(
            "../docs/configuration.md",
            (TABLE_START, TABLE_END),
            &settings_table(),
            "UPDATE_DOCS=1 cargo test -p backend --lib config::reference",
        );
    }

    #[test]
    fn every_setting_with_a_variable_is_in_the_table_once() {
        let table = settings_table();
        let command = Settings::augment_args(Command::new("backend"));
        let variables: Vec<_> = command
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .collect();
        assert!(
            variables.len() >= 25,
            "found only {} settings",
            variables.len()
        );
        for variable in variables {
            let cell = format!("| `{}` |", variable.to_string_lossy());
            assert_eq!(table.matches(&cell).count(), 1, "{cell} in\n{table}");
        }
        for secret in &SECRET_SETTINGS {
            assert!(table.contains(&format!("`{}_FILE`", secret.name)));
        }
    }
}
