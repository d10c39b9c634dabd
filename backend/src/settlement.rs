//! `backend settle FILE`: imports the bank's end-of-day settlement file (SPEC §7, "Settlement
//! file"), the final word on every movement the bank settled.
//!
//! The file is read whole and refused whole if any line is malformed (the error names the
//! line), so nothing of a bad file is applied. Then its lines are applied in batches of
//! [`SETTLE_BATCH`], one transaction each (the store's `settle`): an undecided movement of ours (an `unknown` key, one
//! awaiting settlement, a released claim whose first call landed late) gets the bank's word and
//! its key `done`, so the customer's next retry replays it; a line that disagrees with ours (an
//! amount, a contradicting status) is reported and written to that key's audit trail, never
//! applied; a reference not in our records (never issued, or lost in a restore of the database:
//! docs/procedures/restore-to-a-point-in-time.md) is reported. Importing the same file again
//! changes nothing: every line is then "already final".

use bank_api::settlement::{SettlementFileError, SettlementRow, parse};

use crate::domain::Cause;
use crate::state::AppState;
use crate::store::{Settlement, StoreError};

/// Lines applied per transaction: a day's file of a few hundred thousand lines commits in a few
/// hundred transactions, none holding its locks for long; a failure part-way keeps the batches
/// before it, and importing the file again is safe.
pub const SETTLE_BATCH: usize = 500;

/// What an import did, line by line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// Movements decided by the file.
    pub resolved: usize,
    /// Lines about movements already final here, as the bank says.
    pub already_final: usize,
    /// Lines that disagree with our records, each with why.
    pub mismatched: Vec<String>,
    /// References we never issued.
    pub unknown_references: Vec<String>,
}

impl std::fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "resolved {}, already final {}, mismatched {}, unknown references {}",
            self.resolved,
            self.already_final,
            self.mismatched.len(),
            self.unknown_references.len()
        )?;
        for mismatch in &self.mismatched {
            writeln!(f, "mismatched: {mismatch}")?;
        }
        for reference in &self.unknown_references {
            writeln!(f, "unknown reference: {reference}")?;
        }
        Ok(())
    }
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file is malformed; nothing was applied.
    #[error("the settlement file is malformed, nothing was applied: {0}")]
    Malformed(#[from] SettlementFileError),
    /// The database failed part-way; the batches before were applied (importing again is
    /// safe).
    #[error("the database failed during the import (importing the file again is safe): {0}")]
    Store(#[from] StoreError),
}

/// Imports the settlement file `text`, recorded against `cause`.
pub async fn import(
    state: &AppState,
    text: &str,
    cause: &Cause,
) -> Result<ImportSummary, ImportError> {
    let rows = parse(text)?;
    let mut summary = ImportSummary::default();
    for batch in rows.chunks(SETTLE_BATCH) {
        let settled = state.leases().settle(batch, cause).await?;
        for (row, settlement) in batch.iter().zip(settled) {
            summary.count(row, settlement);
        }
    }
    Ok(summary)
}

impl ImportSummary {
    /// Adds what one line did, logging a line that was not applied.
    fn count(&mut self, row: &SettlementRow, settlement: Settlement) {
        match settlement {
            Settlement::Resolved => self.resolved += 1,
            Settlement::AlreadyFinal => self.already_final += 1,
            Settlement::Mismatched(why) => {
                tracing::warn!(reference = row.reference, %why, "settlement line disagrees with our records");
                self.mismatched.push(why);
            }
            Settlement::UnknownReference => {
                tracing::warn!(
                    reference = row.reference,
                    "settlement line for a reference not in our records (never issued, or lost in a restore)"
                );
                self.unknown_references.push(row.reference.clone());
            }
        }
    }
}
