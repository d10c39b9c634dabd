//! The store's own column types, each encoded the way its database keeps it, so a statement
//! binds and reads them the same way on both:
//! - [`Timestamp`]: `timestamptz` in PostgreSQL, INTEGER unix microseconds in SQLite;
//! - [`Span`]: a length of time added to or taken from a timestamp: an `interval` in
//!   PostgreSQL, microseconds in SQLite (`{now} - $1` reads right in both);
//! - [`TrailRequestId`]: a request id in the trail's two columns: a canonical UUID as its 16
//!   bytes (`request_id`), anything else as sent (`request_id_text`);
//! - [`Label`]: a named state (`KeyState`, `Operation`, `MovementStatus`, the trail's
//!   `EventKind`): a PostgreSQL enum type, or TEXT under a CHECK in SQLite;
//! - [`Subject`]: a user, the identity provider's subject: `text COLLATE "C"` in PostgreSQL,
//!   TEXT in SQLite; read back through the same check a token's is.

use std::time::Duration;

use shared::api::MovementStatus;
use shared::{KeyState, Operation, UserId};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::PgInterval;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef};
use sqlx::sqlite::{SqliteArgumentValue, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Postgres, Sqlite, Type};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::EventKind;

/// A point in time, as a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub OffsetDateTime);

/// A length of time, as an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

/// A request id as the trail keeps it, in two columns: a UUID in canonical form (lower-case,
/// hyphenated: the edge's and the backend's own ids) as its 16 bytes, anything else a client
/// sent as text. A row has at most one of the two; reading them back gives the id as sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrailRequestId {
    /// The `request_id` column.
    pub uuid: Option<Uuid>,
    /// The `request_id_text` column.
    pub text: Option<String>,
}

impl TrailRequestId {
    /// The columns for the id `sent` (`None`: no request caused the event).
    pub fn of(sent: Option<&str>) -> TrailRequestId {
        let Some(sent) = sent else {
            return TrailRequestId::default();
        };
        let canonical = Uuid::try_parse(sent)
            .ok()
            .filter(|uuid| uuid.hyphenated().encode_lower(&mut Uuid::encode_buffer()) == sent);
        match canonical {
            Some(uuid) => TrailRequestId {
                uuid: Some(uuid),
                text: None,
            },
            None => TrailRequestId {
                uuid: None,
                text: Some(sent.to_owned()),
            },
        }
    }

    /// The id as it was sent, from the two columns read back.
    pub fn read(uuid: Option<Uuid>, text: Option<String>) -> Option<String> {
        uuid.map(|uuid| uuid.hyphenated().to_string()).or(text)
    }
}

/// A named state, as a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label<T>(pub T);

/// A state stored by its name.
pub trait Labelled: Copy + Send + Sync + 'static {
    /// The PostgreSQL enum type of the column.
    const PG_TYPE: &'static str;
    /// The stored name.
    fn label(self) -> &'static str;
    /// The state a stored name stands for.
    fn from_label(label: &str) -> Option<Self>;
}

impl Labelled for KeyState {
    const PG_TYPE: &'static str = "key_state";
    fn label(self) -> &'static str {
        self.as_str()
    }
    fn from_label(label: &str) -> Option<Self> {
        KeyState::from_name(label)
    }
}

impl Labelled for Operation {
    const PG_TYPE: &'static str = "idempotent_operation";
    fn label(self) -> &'static str {
        self.name()
    }
    fn from_label(label: &str) -> Option<Self> {
        Operation::from_name(label)
    }
}

impl Labelled for MovementStatus {
    const PG_TYPE: &'static str = "movement_status";
    fn label(self) -> &'static str {
        self.name()
    }
    fn from_label(label: &str) -> Option<Self> {
        MovementStatus::from_name(label)
    }
}

impl Labelled for EventKind {
    const PG_TYPE: &'static str = "key_event_kind";
    fn label(self) -> &'static str {
        self.name()
    }
    fn from_label(label: &str) -> Option<Self> {
        EventKind::from_name(label)
    }
}

/// A user as a column: `user_id` in every table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject(pub UserId);

impl Subject {
    /// `user` as a column value (a shared pointer's copy, not the string's).
    pub fn of(user: &UserId) -> Subject {
        Subject(user.clone())
    }

    fn parse(stored: &str) -> Result<Subject, BoxDynError> {
        UserId::from_subject(stored)
            .map(Subject)
            .map_err(|why| format!("user_id {stored:?}: {why}").into())
    }
}

impl<T: Labelled> Label<T> {
    fn parse(label: &str) -> Result<Self, BoxDynError> {
        T::from_label(label)
            .map(Label)
            .ok_or_else(|| format!("unknown {} {label:?}", T::PG_TYPE).into())
    }
}

/// Microseconds, the unit of SQLite's timestamps and spans.
fn micros(span: Duration) -> i64 {
    i64::try_from(span.as_micros()).unwrap_or(i64::MAX)
}

// PostgreSQL.

impl Type<Postgres> for Timestamp {
    fn type_info() -> PgTypeInfo {
        <OffsetDateTime as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Timestamp {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <OffsetDateTime as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Timestamp {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Timestamp(<OffsetDateTime as Decode<Postgres>>::decode(
            value,
        )?))
    }
}

impl Type<Postgres> for Span {
    fn type_info() -> PgTypeInfo {
        <PgInterval as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Span {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        let interval = PgInterval {
            months: 0,
            days: 0,
            microseconds: micros(self.0),
        };
        <PgInterval as Encode<Postgres>>::encode_by_ref(&interval, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Span {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let interval = <PgInterval as Decode<Postgres>>::decode(value)?;
        Ok(Span(Duration::from_micros(u64::try_from(
            interval.microseconds,
        )?)))
    }
}

impl<T: Labelled> Type<Postgres> for Label<T> {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_name(T::PG_TYPE)
    }
}

impl<T: Labelled> Encode<'_, Postgres> for Label<T> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as Encode<Postgres>>::encode(self.0.label(), buf)
    }
}

impl<'r, T: Labelled> Decode<'r, Postgres> for Label<T> {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Label::parse(<&str as Decode<Postgres>>::decode(value)?)
    }
}

impl Type<Postgres> for Subject {
    fn type_info() -> PgTypeInfo {
        <str as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Subject {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as Encode<Postgres>>::encode(self.0.as_str(), buf)
    }
}

impl<'r> Decode<'r, Postgres> for Subject {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Subject::parse(<&str as Decode<Postgres>>::decode(value)?)
    }
}

// SQLite.

impl Type<Sqlite> for Timestamp {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Timestamp {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        let micros = i64::try_from(self.0.unix_timestamp_nanos() / 1_000)?;
        <i64 as Encode<Sqlite>>::encode(micros, buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Timestamp {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let micros = <i64 as Decode<Sqlite>>::decode(value)?;
        Ok(Timestamp(OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(micros) * 1_000,
        )?))
    }
}

impl Type<Sqlite> for Span {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Span {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Sqlite>>::encode(micros(self.0), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Span {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let micros = <i64 as Decode<Sqlite>>::decode(value)?;
        Ok(Span(Duration::from_micros(u64::try_from(micros)?)))
    }
}

impl<T: Labelled> Type<Sqlite> for Label<T> {
    fn type_info() -> SqliteTypeInfo {
        <str as Type<Sqlite>>::type_info()
    }
}

impl<'q, T: Labelled> Encode<'q, Sqlite> for Label<T> {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <&str as Encode<Sqlite>>::encode(self.0.label(), buf)
    }
}

impl<'r, T: Labelled> Decode<'r, Sqlite> for Label<T> {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        Label::parse(<&str as Decode<Sqlite>>::decode(value)?)
    }
}

impl Type<Sqlite> for Subject {
    fn type_info() -> SqliteTypeInfo {
        <str as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Subject {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <String as Encode<Sqlite>>::encode(self.0.as_str().to_owned(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Subject {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        Subject::parse(<&str as Decode<Sqlite>>::decode(value)?)
    }
}

#[cfg(test)]
mod tests {
    use super::TrailRequestId;

    /// Every id comes back as it was sent; only a canonical UUID goes in the 16-byte column
    /// (an upper-case, braced or unhyphenated UUID would not read back the same from it).
    #[test]
    fn a_request_id_reads_back_as_sent() {
        let canonical = "0b8c3c2e-8d0e-4f7a-9a51-3f1b2c4d5e6f";
        for sent in [
            canonical,
            "0B8C3C2E-8D0E-4F7A-9A51-3F1B2C4D5E6F",
            "{0b8c3c2e-8d0e-4f7a-9a51-3f1b2c4d5e6f}",
            "0b8c3c2e8d0e4f7a9a513f1b2c4d5e6f",
            "phone-attempt-1",
        ] {
            let columns = TrailRequestId::of(Some(sent));
            assert_eq!(
                columns.uuid.is_some(),
                sent == canonical,
                "{sent}: {columns:?}"
            );
            assert!(columns.uuid.is_none() || columns.text.is_none(), "{sent}");
            let read = TrailRequestId::read(columns.uuid, columns.text);
            assert_eq!(read.as_deref(), Some(sent));
        }
        assert_eq!(TrailRequestId::of(None), TrailRequestId::default());
        assert_eq!(TrailRequestId::read(None, None), None);
    }
}
