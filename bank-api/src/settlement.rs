//! The bank's end-of-day settlement file (SPEC §7, "Settlement file"): the final word on every
//! movement it settled, as CSV.
//!
//! ```text
//! reference,amount_paise,status,settled_at
//! pay-0b6f…,230000,debited,2026-12-06T18:29:59Z
//! refund-41c2…,50000,refunded,2026-12-06T18:30:00Z
//! ```
//!
//! The header line is required as written; then one movement a line: its reference, the amount
//! in paise (a positive whole number), a status word (`debited`, `refunded`, `declined`,
//! `rejected`) and when it settled (RFC 3339). No quoting: no field can hold a comma. A blank
//! last line, CRLF line ends and a UTF-8 byte-order mark (a Windows export's) are allowed.
//! Reading is strict, and an error names the line (1 is the header), so a bad file is refused
//! whole, before anything in it is applied. The bank simulator writes it ([`to_csv`]), the
//! backend's `settle` command reads it ([`parse`]).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The first line of every settlement file.
pub const SETTLEMENT_HEADER: &str = "reference,amount_paise,status,settled_at";

/// One settled movement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementRow {
    /// The reference the movement was made under.
    pub reference: String,
    /// How much moved (or would have), in paise.
    pub amount_paise: u64,
    /// What the bank did.
    pub status: Settled,
    /// When it settled.
    pub settled_at: OffsetDateTime,
}

/// What the bank did with a settled movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// A debit moved the money.
    Debited,
    /// A refund moved the money back.
    Refunded,
    /// A debit was refused; no money moved.
    Declined,
    /// A refund was refused; no money moved.
    Rejected,
}

impl Settled {
    const ALL: [Settled; 4] = [
        Settled::Debited,
        Settled::Refunded,
        Settled::Declined,
        Settled::Rejected,
    ];

    /// The word in the file.
    pub const fn as_str(self) -> &'static str {
        match self {
            Settled::Debited => "debited",
            Settled::Refunded => "refunded",
            Settled::Declined => "declined",
            Settled::Rejected => "rejected",
        }
    }

    /// The status named `word`, if it is one.
    pub fn from_word(word: &str) -> Option<Settled> {
        Settled::ALL
            .into_iter()
            .find(|status| status.as_str() == word)
    }

    /// Whether the money moved.
    pub const fn moved(self) -> bool {
        matches!(self, Settled::Debited | Settled::Refunded)
    }
}

/// A line of a settlement file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct SettlementFileError {
    /// The line, counting the header as 1.
    pub line: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// Reads a whole settlement file; the first bad line is the error.
pub fn parse(text: &str) -> Result<Vec<SettlementRow>, SettlementFileError> {
    let mut lines = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line));
    match lines.next() {
        Some((_, header)) if header.trim_end_matches('\r') == SETTLEMENT_HEADER => {}
        _ => {
            return Err(SettlementFileError {
                line: 1,
                problem: format!("the header must be `{SETTLEMENT_HEADER}`"),
            });
        }
    }
    let mut rows = Vec::new();
    let mut blank_at = None;
    for (line, text) in lines {
        let text = text.trim_end_matches('\r');
        if text.is_empty() {
            blank_at = Some(line);
            continue;
        }
        if let Some(blank) = blank_at {
            return Err(SettlementFileError {
                line: blank,
                problem: "an empty line before the end of the file".to_owned(),
            });
        }
        rows.push(parse_row(text).map_err(|problem| SettlementFileError { line, problem })?);
    }
    Ok(rows)
}

fn parse_row(text: &str) -> Result<SettlementRow, String> {
    let fields: Vec<&str> = text.split(',').collect();
    let [reference, amount, status, settled_at] = fields[..] else {
        return Err(format!("expected 4 fields, found {}", fields.len()));
    };
    if reference.is_empty() || reference.len() > 200 || !reference.chars().all(is_reference_char) {
        return Err(format!("{reference:?} is not a reference"));
    }
    let amount_paise = amount
        .parse::<u64>()
        .ok()
        .filter(|paise| *paise > 0 && amount.chars().all(|c| c.is_ascii_digit()))
        .ok_or_else(|| format!("amount_paise {amount:?} is not a positive whole number"))?;
    let status = Settled::from_word(status).ok_or_else(|| {
        format!("status {status:?} is not debited, refunded, declined or rejected")
    })?;
    let settled_at = OffsetDateTime::parse(settled_at, &Rfc3339)
        .map_err(|_| format!("settled_at {settled_at:?} is not an RFC 3339 time"))?;
    Ok(SettlementRow {
        reference: reference.to_owned(),
        amount_paise,
        status,
        settled_at,
    })
}

fn is_reference_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')
}

/// Writes `rows` as a settlement file.
pub fn to_csv(rows: &[SettlementRow]) -> String {
    let mut text = format!("{SETTLEMENT_HEADER}\n");
    for row in rows {
        let settled_at = row
            .settled_at
            .format(&Rfc3339)
            .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned());
        text.push_str(&format!(
            "{},{},{},{settled_at}\n",
            row.reference,
            row.amount_paise,
            row.status.as_str()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(reference: &str, status: Settled) -> SettlementRow {
        SettlementRow {
            reference: reference.to_owned(),
            amount_paise: 230_000,
            status,
            settled_at: OffsetDateTime::from_unix_timestamp(1_765_045_799).expect("valid"),
        }
    }

    #[test]
    fn a_written_file_reads_back() {
        let rows = vec![
            row("pay-1", Settled::Debited),
            row("refund-1", Settled::Refunded),
            row("pay-2", Settled::Declined),
        ];
        assert_eq!(parse(&to_csv(&rows)), Ok(rows));
        assert_eq!(parse(&format!("{SETTLEMENT_HEADER}\r\n")), Ok(vec![]));
    }

    #[test]
    fn a_windows_export_reads_the_same() {
        let rows = vec![
            row("pay-1", Settled::Debited),
            row("pay-2", Settled::Declined),
        ];
        let exported = format!("\u{feff}{}", to_csv(&rows).replace('\n', "\r\n"));
        assert_eq!(parse(&exported), Ok(rows));
    }

    #[test]
    fn a_bad_line_is_named() {
        let cases = [
            ("reference,amount\n", 1, "header"),
            ("", 1, "header"),
            ("pay-1,100,debited\n", 2, "4 fields"),
            ("pay-1,-5,debited,2026-12-06T00:00:00Z\n", 2, "amount_paise"),
            ("pay-1,0,debited,2026-12-06T00:00:00Z\n", 2, "amount_paise"),
            ("pay-1,+5,debited,2026-12-06T00:00:00Z\n", 2, "amount_paise"),
            ("pay-1,5,moved,2026-12-06T00:00:00Z\n", 2, "status"),
            ("pay-1,5,debited,yesterday\n", 2, "settled_at"),
            ("pay 1,5,debited,2026-12-06T00:00:00Z\n", 2, "reference"),
            (
                "pay-1,5,debited,2026-12-06T00:00:00Z\n\npay-2,5,debited,2026-12-06T00:00:00Z\n",
                3,
                "empty line",
            ),
        ];
        for (body, line, word) in cases {
            let text = if line == 1 {
                body.to_owned()
            } else {
                format!("{SETTLEMENT_HEADER}\n{body}")
            };
            let error = parse(&text).expect_err(body);
            assert_eq!(error.line, line, "{body:?}: {error}");
            assert!(error.to_string().contains(word), "{body:?}: {error}");
        }
    }
}
