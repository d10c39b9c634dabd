//! Paging the operator API's lists: every list returns one page and, when more follow, a
//! `next` cursor, which the next request passes back (`?before=…` for lists that run newest
//! first, `?after=…` for the queue, which runs oldest first) with an optional `?limit=` (1 to
//! [`MAX_LIMIT`], [`DEFAULT_LIMIT`] by default). Cursors are opaque text to a client; a cursor
//! or limit that does not read is a 422 `invalid-field` naming the parameter, never a 500.

use std::collections::HashMap;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use shared::{Problem, UserId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::error::Error;
use crate::store::{MovementCursor, Page, QueueCursor};

/// The items a page holds unless the request says otherwise.
pub const DEFAULT_LIMIT: usize = 50;

/// The most items one page holds.
pub const MAX_LIMIT: usize = 200;

/// A request's query parameters, or a 400 if they do not read.
pub type PageQuery = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The page `query` asks for, its cursor in `parameter` read by `cursor`.
pub fn page_of<C>(
    query: PageQuery,
    parameter: &str,
    cursor: impl Fn(&str) -> Option<C>,
) -> Result<Page<C>, Error> {
    let Query(query) = query.map_err(|_| bad_parameter("query", "The query does not read."))?;
    let limit = match query.get("limit") {
        None => DEFAULT_LIMIT,
        Some(text) => text
            .parse()
            .ok()
            .filter(|limit| (1..=MAX_LIMIT).contains(limit))
            .ok_or_else(|| {
                bad_parameter(
                    "limit",
                    &format!("limit is a whole number, 1 to {MAX_LIMIT}."),
                )
            })?,
    };
    let from = match query.get(parameter) {
        None => None,
        Some(text) => Some(cursor(text).ok_or_else(|| {
            bad_parameter(
                parameter,
                "This cursor does not read: pass back a `next` value as it was given.",
            )
        })?),
    };
    Ok(Page { from, limit })
}

fn bad_parameter(parameter: &str, detail: &str) -> Error {
    Problem::invalid_field(parameter, detail.to_owned()).into()
}

/// An event cursor: the last event's id.
pub fn event_cursor(text: &str) -> Option<i64> {
    text.parse().ok().filter(|id| *id > 0)
}

/// A movement cursor as text: `MICROS_UUID`.
pub fn movement_cursor_text(cursor: &MovementCursor) -> String {
    format!("{}_{}", micros(cursor.created_at), cursor.id)
}

/// The inverse of [`movement_cursor_text`].
pub fn movement_cursor(text: &str) -> Option<MovementCursor> {
    let (at, id) = text.split_once('_')?;
    Some(MovementCursor {
        created_at: from_micros(at)?,
        id: Uuid::parse_str(id).ok()?,
    })
}

/// A queue cursor as text: `MICROS_UUID_USER`, the user last, as a subject may hold `_`.
pub fn queue_cursor_text(cursor: &QueueCursor) -> String {
    format!(
        "{}_{}_{}",
        micros(cursor.claimed_at),
        cursor.key,
        cursor.user_id
    )
}

/// The inverse of [`queue_cursor_text`].
pub fn queue_cursor(text: &str) -> Option<QueueCursor> {
    let mut parts = text.splitn(3, '_');
    Some(QueueCursor {
        claimed_at: from_micros(parts.next()?)?,
        key: Uuid::parse_str(parts.next()?).ok()?,
        user_id: UserId::from_subject(parts.next()?).ok()?,
    })
}

fn micros(at: OffsetDateTime) -> i128 {
    at.unix_timestamp_nanos() / 1_000
}

fn from_micros(text: &str) -> Option<OffsetDateTime> {
    let micros: i128 = text.parse().ok()?;
    OffsetDateTime::from_unix_timestamp_nanos(micros.checked_mul(1_000)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_they_wrote_and_refuse_anything_else() {
        let at =
            OffsetDateTime::from_unix_timestamp_nanos(1_796_292_000_123_456_000).expect("in range");
        let movement = MovementCursor {
            created_at: at,
            id: Uuid::from_u128(9),
        };
        assert_eq!(
            movement_cursor(&movement_cursor_text(&movement)),
            Some(movement)
        );
        let queued = QueueCursor {
            claimed_at: at,
            user_id: UserId::from_subject("auth0|4_2").expect("a subject"),
            key: Uuid::from_u128(7),
        };
        assert_eq!(queue_cursor(&queue_cursor_text(&queued)), Some(queued));
        for bad in [
            "",
            "_",
            "x_y",
            "1_not-a-uuid",
            "99999999999999999999999999_00000000-0000-0000-0000-000000000009",
        ] {
            assert_eq!(movement_cursor(bad), None, "{bad:?}");
            assert_eq!(queue_cursor(bad), None, "{bad:?}");
        }
        assert_eq!(event_cursor("12"), Some(12));
        for bad in ["", "0", "-3", "1.5", "x"] {
            assert_eq!(event_cursor(bad), None, "{bad:?}");
        }
    }
}
