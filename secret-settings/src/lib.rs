//! Settings that hold secrets: the backend's bearer-token secret (`AUTH_JWT_SECRET`) and its
//! database URL, whose password is a secret too (`DATABASE_URL`); the `phone`'s token
//! (`PHONE_TOKEN`) and development signing secret.
//!
//! Each is read from its environment variable, or from the file its `…_FILE` variable names (a
//! mounted secret: `AUTH_JWT_SECRET_FILE=/run/secrets/jwt`), never from the command line, where
//! every user of the machine sees it in the process list. Setting both is refused rather than
//! guessed between. A file's one trailing line break is not part of the secret (files written
//! by `echo` end in one). Once read, a secret lives in a [`SecretString`], whose `Debug` prints
//! `[REDACTED]`, so no log line or panic message can carry it.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, bail};
pub use secrecy::{ExposeSecret, SecretString};

/// Reads the secret setting `name` through `lookup` (the process environment in production):
/// `name` itself, or the file `{name}_FILE` names. `None` when neither is set.
pub fn read_secret(
    name: &str,
    lookup: impl Fn(&str) -> Option<OsString>,
) -> anyhow::Result<Option<SecretString>> {
    let file_setting = format!("{name}_FILE");
    match (lookup(name), lookup(&file_setting)) {
        (Some(_), Some(_)) => bail!("set {name} or {file_setting}, not both"),
        (Some(value), None) => {
            let value = value
                .into_string()
                .map_err(|_| anyhow::anyhow!("{name} is not valid UTF-8"))?;
            Ok(Some(SecretString::from(value)))
        }
        (None, Some(path)) => read_secret_file(&file_setting, PathBuf::from(path)).map(Some),
        (None, None) => Ok(None),
    }
}

/// A secret that rotates: the current one (`current`) and, during a rotation, the one it
/// replaces (`previous`), each read as by [`read_secret`], the current first. None at all is
/// empty; a previous one without a current one, or either shorter than `min_bytes`, is refused
/// naming the settings.
pub fn read_rotating_secret(
    current: &str,
    previous: &str,
    min_bytes: usize,
    lookup: impl Fn(&str) -> Option<OsString>,
) -> anyhow::Result<Vec<SecretString>> {
    let current_secret = read_secret(current, &lookup)?;
    let previous_secret = read_secret(previous, &lookup)?;
    if current_secret.is_none() && previous_secret.is_some() {
        bail!("{previous} is set without {current}");
    }
    let secrets: Vec<SecretString> = current_secret.into_iter().chain(previous_secret).collect();
    if secrets
        .iter()
        .any(|secret| secret.expose_secret().len() < min_bytes)
    {
        bail!("{current} and {previous} must be at least {min_bytes} bytes");
    }
    Ok(secrets)
}

/// The process environment, for [`read_secret`].
pub fn process_environment(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The secret in the file at `path` (named by the setting `file_setting`), without its one
/// trailing line break. The error names the setting and the path, never the contents.
fn read_secret_file(file_setting: &str, path: PathBuf) -> anyhow::Result<SecretString> {
    let mut contents = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {file_setting} ({})", path.display()))?;
    for line_break in ["\r\n", "\n"] {
        if contents.ends_with(line_break) {
            contents.truncate(contents.len() - line_break.len());
            break;
        }
    }
    if contents.is_empty() {
        bail!("{file_setting} ({}) is empty", path.display());
    }
    Ok(SecretString::from(contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(set, _)| set == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    fn secret_file(contents: &str) -> (tempfile::TempDir, String) {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("secret");
        std::fs::write(&path, contents).expect("writing the secret file");
        (directory, path.to_string_lossy().into_owned())
    }

    #[test]
    fn a_rotating_secret_is_the_current_then_the_previous() {
        let read = |pairs: &[(&str, &str)]| {
            read_rotating_secret("KEY", "KEY_PREVIOUS", 4, environment(pairs))
                .map(|secrets| {
                    secrets
                        .iter()
                        .map(|secret| secret.expose_secret().to_owned())
                        .collect::<Vec<_>>()
                })
                .map_err(|error| error.to_string())
        };
        assert_eq!(read(&[]), Ok(Vec::new()));
        assert_eq!(read(&[("KEY", "new1")]), Ok(vec!["new1".to_owned()]));
        assert_eq!(
            read(&[("KEY_PREVIOUS", "old1"), ("KEY", "new1")]),
            Ok(vec!["new1".to_owned(), "old1".to_owned()])
        );
        assert_eq!(
            read(&[("KEY_PREVIOUS", "old1")]),
            Err("KEY_PREVIOUS is set without KEY".to_owned())
        );
        assert_eq!(
            read(&[("KEY", "new1"), ("KEY_PREVIOUS", "old")]),
            Err("KEY and KEY_PREVIOUS must be at least 4 bytes".to_owned())
        );
    }

    #[test]
    fn the_variable_itself_is_read() {
        let secret = read_secret("TOKEN", environment(&[("TOKEN", "from-the-env")]))
            .expect("read")
            .expect("set");
        assert_eq!(secret.expose_secret(), "from-the-env");
    }

    #[test]
    fn a_file_is_read_without_its_one_trailing_line_break() {
        for (contents, expected) in [
            ("s3cret\n", "s3cret"),
            ("s3cret\r\n", "s3cret"),
            ("s3cret", "s3cret"),
            ("s3cret\n\n", "s3cret\n"),
        ] {
            let (_directory, path) = secret_file(contents);
            let secret = read_secret("TOKEN", environment(&[("TOKEN_FILE", &path)]))
                .expect("read")
                .expect("set");
            assert_eq!(secret.expose_secret(), expected, "file {contents:?}");
        }
    }

    #[test]
    fn both_set_is_refused_naming_both() {
        let (_directory, path) = secret_file("s3cret");
        let error = read_secret(
            "TOKEN",
            environment(&[("TOKEN", "x"), ("TOKEN_FILE", &path)]),
        )
        .expect_err("both set");
        assert_eq!(error.to_string(), "set TOKEN or TOKEN_FILE, not both");
    }

    #[test]
    fn a_missing_or_empty_file_is_refused_naming_the_setting_not_the_contents() {
        let missing = read_secret(
            "TOKEN",
            environment(&[("TOKEN_FILE", "/nonexistent/secret")]),
        )
        .expect_err("missing file");
        assert!(
            format!("{missing:#}").contains("TOKEN_FILE (/nonexistent/secret)"),
            "{missing:#}"
        );

        let (_directory, path) = secret_file("\n");
        let empty =
            read_secret("TOKEN", environment(&[("TOKEN_FILE", &path)])).expect_err("empty file");
        assert!(empty.to_string().contains("is empty"), "{empty}");
    }

    #[test]
    fn unset_is_none() {
        assert!(
            read_secret("TOKEN", environment(&[]))
                .expect("read")
                .is_none()
        );
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let secret = SecretString::from("hunter2-hunter2".to_owned());
        let printed = format!("{secret:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
    }
}
