//! What the store's statements need from a database, stated once, so that every statement that
//! reads the same on PostgreSQL and SQLite is written once, generic over [`Db`].
//!
//! sqlx is generic over its `Database` trait, but a generic function must then prove, type by
//! type, that each value it binds or reads can be encoded and decoded for that database, and
//! that a connection can execute a query: a dozen `where` lines on every function. Here those
//! proofs are made once, as capabilities of the database type itself:
//! - [`Codec<T>`]: binds and reads values of type `T` (every type the store uses);
//! - [`Exec`]: runs a query on a connection;
//! - [`crate::store::dialect::Dialect`]: the few things that truly differ (the clock's SQL,
//!   row-lock clauses, how a write transaction begins, the claim statement).
//!
//! A statement then reads as ordinary sqlx code: `D::fetch_optional(conn, sqlx::query(&sql)
//! .arg(key_id).arg(state))`, and `Fields::<D>::of(&row).get("state")` to read a column.

use futures_util::future::BoxFuture;
use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};
use time::OffsetDateTime;
use uuid::Uuid;

use super::columns::{Label, Span, Subject, Timestamp};
use super::dialect::Dialect;
use super::error::StoreError;
use shared::api::MovementStatus;
use shared::{KeyState, Operation};

use crate::domain::EventKind;

/// A database the store runs on: PostgreSQL or SQLite (see the module docs). Implemented in
/// `store::postgres` and `store::sqlite`, where the compiler checks every capability.
pub trait Db:
    Dialect
    + Exec
    + Codec<i64>
    + Codec<i16>
    + Codec<bool>
    + Codec<Uuid>
    + Codec<Option<Uuid>>
    + Codec<Vec<u8>>
    + Codec<Option<Vec<u8>>>
    + Codec<String>
    + Codec<Option<String>>
    + Codec<Option<i64>>
    + Codec<Timestamp>
    + Codec<Option<Timestamp>>
    + Codec<Span>
    + Codec<Label<KeyState>>
    + Codec<Label<Operation>>
    + Codec<Label<MovementStatus>>
    + Codec<Option<Label<MovementStatus>>>
    + Codec<Label<EventKind>>
    + Codec<Subject>
{
}

/// Binds and reads values of type `T`: implemented for every database that sqlx can encode and
/// decode `T` for (with [`super::columns`] adding the store's own column types).
pub trait Codec<T>: Database {
    /// Binds `value` as the query's next argument.
    fn bind<'q>(
        query: Query<'q, Self, <Self as Database>::Arguments<'q>>,
        value: T,
    ) -> Query<'q, Self, <Self as Database>::Arguments<'q>>
    where
        T: 'q;

    /// Reads the column named `column` of `row`.
    fn get(row: &Self::Row, column: &str) -> Result<T, sqlx::Error>;
}

impl<D, T> Codec<T> for D
where
    D: Database,
    T: for<'q> Encode<'q, D> + for<'r> Decode<'r, D> + Type<D> + Send,
    for<'a> &'a str: ColumnIndex<D::Row>,
{
    fn bind<'q>(query: Query<'q, D, D::Arguments<'q>>, value: T) -> Query<'q, D, D::Arguments<'q>>
    where
        T: 'q,
    {
        query.bind(value)
    }

    fn get(row: &D::Row, column: &str) -> Result<T, sqlx::Error> {
        row.try_get(column)
    }
}

/// Runs queries on a connection (a pooled one or a transaction's).
pub trait Exec: Database {
    /// The one row the query returns, if any.
    fn fetch_optional<'c, 'q: 'c>(
        conn: &'c mut Self::Connection,
        query: Query<'q, Self, <Self as Database>::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<Option<Self::Row>, sqlx::Error>>;

    /// The one row the query returns; an error if none.
    fn fetch_one<'c, 'q: 'c>(
        conn: &'c mut Self::Connection,
        query: Query<'q, Self, <Self as Database>::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<Self::Row, sqlx::Error>>;

    /// Every row the query returns.
    fn fetch_all<'c, 'q: 'c>(
        conn: &'c mut Self::Connection,
        query: Query<'q, Self, <Self as Database>::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>>;

    /// Runs the statement; how many rows it changed.
    fn execute<'c, 'q: 'c>(
        conn: &'c mut Self::Connection,
        query: Query<'q, Self, <Self as Database>::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<u64, sqlx::Error>>;
}

impl<D> Exec for D
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
{
    fn fetch_optional<'c, 'q: 'c>(
        conn: &'c mut D::Connection,
        query: Query<'q, D, D::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<Option<D::Row>, sqlx::Error>> {
        conn.fetch_optional(query)
    }

    fn fetch_one<'c, 'q: 'c>(
        conn: &'c mut D::Connection,
        query: Query<'q, D, D::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<D::Row, sqlx::Error>> {
        conn.fetch_one(query)
    }

    fn fetch_all<'c, 'q: 'c>(
        conn: &'c mut D::Connection,
        query: Query<'q, D, D::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<Vec<D::Row>, sqlx::Error>> {
        conn.fetch_all(query)
    }

    fn execute<'c, 'q: 'c>(
        conn: &'c mut D::Connection,
        query: Query<'q, D, D::Arguments<'q>>,
    ) -> BoxFuture<'c, Result<u64, sqlx::Error>> {
        let done = conn.execute(query);
        Box::pin(async move { Ok(D::rows_affected(&done.await?)) })
    }
}

/// `query.arg(value)`: binds through [`Codec`], so generic statements bind any store value.
pub trait Arg<'q, D: Database>: Sized {
    /// Binds `value` as the next argument (`$1`, `$2`, … in order).
    fn arg<T: 'q>(self, value: T) -> Self
    where
        D: Codec<T>;
}

impl<'q, D: Database> Arg<'q, D> for Query<'q, D, D::Arguments<'q>> {
    fn arg<T: 'q>(self, value: T) -> Self
    where
        D: Codec<T>,
    {
        D::bind(self, value)
    }
}

/// A row's columns, read through [`Codec`].
pub struct Fields<'r, D: Database>(&'r D::Row);

impl<'r, D: Database> Fields<'r, D> {
    /// The columns of `row`.
    pub fn of(row: &'r D::Row) -> Fields<'r, D> {
        Fields(row)
    }

    /// The column named `column`.
    pub fn get<T>(&self, column: &str) -> Result<T, StoreError>
    where
        D: Codec<T>,
    {
        Ok(D::get(self.0, column)?)
    }

    /// A timestamp column, as a time.
    pub fn time(&self, column: &str) -> Result<OffsetDateTime, StoreError>
    where
        D: Codec<Timestamp>,
    {
        Ok(self.get::<Timestamp>(column)?.0)
    }
}
