//! The key row is defined once (`store::sql::key_row`, docs/code-map.md "Adding a column to a
//! key"): its list of columns is exactly what the migrations make of `idempotency_keys` on
//! PostgreSQL, and on SQLite but for the columns only PostgreSQL has. A column added to a
//! migration and not to the definition (or the other way round) fails here.

use std::collections::BTreeSet;

use backend::store::{KEY_ROW_COLUMNS, KEY_ROW_POSTGRES_ONLY};

use crate::support::{Options, StoreKind, TestApp, TestDb};

async fn the_key_row_definition_names_every_column_the_migrations_make(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        store,
        ..Options::default()
    })
    .await;
    let sql = match app.db {
        TestDb::Postgres(_) => {
            "SELECT CAST(column_name AS TEXT) FROM information_schema.columns \
             WHERE table_name = 'idempotency_keys' AND table_schema = current_schema() \
             ORDER BY ordinal_position"
        }
        TestDb::Sqlite(_) => "SELECT name FROM pragma_table_info('idempotency_keys') ORDER BY cid",
    };
    let migrated: BTreeSet<String> = app.texts(sql).await.into_iter().collect();
    let defined: BTreeSet<String> = KEY_ROW_COLUMNS
        .iter()
        .map(|(column, _)| *column)
        .filter(|column| store == StoreKind::Postgres || !KEY_ROW_POSTGRES_ONLY.contains(column))
        .map(str::to_owned)
        .collect();
    assert_eq!(migrated, defined);
}

for_each_store!(the_key_row_definition_names_every_column_the_migrations_make);
