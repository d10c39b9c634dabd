//! The schema stays ready to shard by customer (docs/design.md, "Beyond one primary"): every
//! primary key and every unique index of every table the migrations create begins with
//! `user_id`, so a key, a payment, a refund and an audit event can live on the shard of their
//! customer, and every uniqueness the claim relies on (one key per customer, one payment per
//! id) is enforced within one shard. A migration that adds a table or a unique index without
//! `user_id` first fails here. The one exception is named: `status_check_pace`, the deployment's
//! single budget of status checks a second (the rail limits the PSP, not a customer), which a
//! sharded deployment keeps in one place.

use crate::support::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_primary_key_and_unique_index_begins_with_user_id() {
    let app = TestApp::spawn().await;
    let indexes: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT t.relname::text, i.relname::text, a.attname::text \
         FROM pg_index x \
         JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_class t ON t.oid = x.indrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] \
         WHERE n.nspname = 'public' AND (x.indisprimary OR x.indisunique) \
           AND t.relname NOT IN ('_sqlx_migrations', 'status_check_pace') \
         ORDER BY 1, 2",
    )
    .fetch_all(app.pg_pool())
    .await
    .expect("the catalogue");
    let tables: Vec<&str> = indexes.iter().map(|(table, _, _)| table.as_str()).collect();
    for table in ["idempotency_keys", "payments", "refunds", "key_events"] {
        assert!(
            tables.contains(&table),
            "{table} has a primary key: {indexes:?}"
        );
    }
    let not_led_by_user: Vec<_> = indexes
        .iter()
        .filter(|(_, _, first_column)| first_column != "user_id")
        .collect();
    assert!(
        not_led_by_user.is_empty(),
        "a primary key or unique index that does not begin with user_id cannot be enforced \
         within one customer's shard: {not_led_by_user:?}"
    );
}
