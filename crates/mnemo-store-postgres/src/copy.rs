//! Row-level access for `mnemo db copy` ([`mnemo_store::copy`]): pages read in read-only
//! transactions, each batch of rows one multi-row `INSERT`.
//!
//! Keys that hold text are compared and ordered `COLLATE "C"` (by their bytes, as copy keys
//! compare), whatever the database's collation. `BOOLEAN` columns travel as `Int` 0 or 1, and
//! text kept as `BYTEA` (memory content, which may hold U+0000) as `Text`: conversions follow
//! the types the database reports for each statement, not a list here. Rows keep their `seq`;
//! [`RowAccess::finish_copy`] then moves every `BIGSERIAL` sequence past the largest one, so
//! new rows never collide with copied ones.

use async_trait::async_trait;
use mnemo_store::StoreError;
use mnemo_store::copy::{Cell, Kind, Row, RowAccess, TABLES, Table};
use tokio_postgres::types::{ToSql, Type};

use crate::PostgresStore;
use crate::engine::{all, backend, col, exec, failure, one};

/// One statement parameter, owned by the statement's call.
type Param<'a> = Box<dyn ToSql + Send + Sync + 'a>;

/// A cell of column `i` as a parameter of type `ty`.
fn param<'a>(table: &Table, i: usize, cell: &'a Cell, ty: &Type) -> Result<Param<'a>, StoreError> {
    let column = &table.columns[i];
    let as_bytes = *ty == Type::BYTEA;
    Ok(match (column.kind, cell) {
        (Kind::Int, Cell::Int(v)) => Box::new(*v),
        (Kind::Int, Cell::Null) => Box::new(None::<i64>),
        (Kind::Bool, Cell::Int(v)) => Box::new(*v != 0),
        (Kind::Bool, Cell::Null) => Box::new(None::<bool>),
        (Kind::Text, Cell::Text(s)) if as_bytes => Box::new(s.as_bytes()),
        (Kind::Text, Cell::Null) if as_bytes => Box::new(None::<&[u8]>),
        (Kind::Text, Cell::Text(s)) => Box::new(s.as_str()),
        (Kind::Text, Cell::Null) => Box::new(None::<&str>),
        (Kind::Bytes, Cell::Bytes(b)) => Box::new(b.as_slice()),
        (Kind::Bytes, Cell::Null) => Box::new(None::<&[u8]>),
        (kind, cell) => {
            return Err(failure(format!("`{}`.`{}` ({kind:?}) cannot hold {cell:?}", table.name, column.name)));
        }
    })
}

fn cell(table: &Table, row: &tokio_postgres::Row, i: usize) -> Result<Cell, StoreError> {
    let cell = match table.columns[i].kind {
        Kind::Int => col::<Option<i64>>(row, i)?.map(Cell::Int),
        Kind::Bool => col::<Option<bool>>(row, i)?.map(|b| Cell::Int(i64::from(b))),
        Kind::Text if *row.columns()[i].type_() == Type::BYTEA => col::<Option<Vec<u8>>>(row, i)?
            .map(|b| {
                String::from_utf8(b).map(Cell::Text).map_err(|_| {
                    failure(format!("`{}`.`{}` holds bytes that are not UTF-8", table.name, table.columns[i].name))
                })
            })
            .transpose()?,
        Kind::Text => col::<Option<String>>(row, i)?.map(Cell::Text),
        Kind::Bytes => col::<Option<Vec<u8>>>(row, i)?.map(Cell::Bytes),
    };
    Ok(cell.unwrap_or(Cell::Null))
}

fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

fn column_list(table: &Table) -> String {
    table.columns.iter().map(|c| quoted(c.name)).collect::<Vec<_>>().join(", ")
}

/// The key's columns as they sort: text by its bytes.
fn key_list(table: &Table) -> String {
    let key: Vec<String> = table
        .key_columns()
        .iter()
        .map(|c| if c.kind == Kind::Text { format!("{} COLLATE \"C\"", quoted(c.name)) } else { quoted(c.name) })
        .collect();
    key.join(", ")
}

/// `SELECT … FROM table [WHERE (key) > ($1…)] ORDER BY key LIMIT n`. Where a text column of a
/// composite key sorts in another collation than its index, the index still gives the leading
/// integer's range and order, and the sort within it is incremental: a page costs the page.
fn select_sql(table: &Table, after: bool, limit: usize) -> String {
    let key = key_list(table);
    let filter = if after {
        let marks: Vec<String> = (1..=table.key.len()).map(|i| format!("${i}")).collect();
        format!(" WHERE ({key}) > ({})", marks.join(", "))
    } else {
        String::new()
    };
    format!("SELECT {} FROM {}{filter} ORDER BY {key} LIMIT {limit}", column_list(table), quoted(table.name))
}

/// `INSERT INTO table (…) VALUES ($1, …), (…)` for `rows` rows.
fn insert_sql(table: &Table, rows: usize) -> String {
    let width = table.columns.len();
    let values: Vec<String> = (0..rows)
        .map(|r| {
            let marks: Vec<String> = (1..=width).map(|c| format!("${}", r * width + c)).collect();
            format!("({})", marks.join(", "))
        })
        .collect();
    format!("INSERT INTO {} ({}) VALUES {}", quoted(table.name), column_list(table), values.join(", "))
}

/// The most parameters one statement may carry.
const MAX_PARAMS: usize = 65_535;

fn kind_of(data_type: &str) -> Option<Kind> {
    match data_type {
        "bigint" => Some(Kind::Int),
        "boolean" => Some(Kind::Bool),
        "text" => Some(Kind::Text),
        // Text kept as its UTF-8 bytes is converted both ways (see the module docs).
        "bytea" => Some(Kind::Bytes),
        _ => None,
    }
}

#[async_trait]
impl RowAccess for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn database_identity(&self) -> Result<String, StoreError> {
        // The server instance (its start time), the database and the schema: equal however the
        // database was reached, different for any other.
        crate::read!(self.engine, |tx| {
            let row = one(
                &tx,
                "SELECT pg_postmaster_start_time()::text, \
                        (SELECT oid FROM pg_database WHERE datname = current_database())::text, \
                        current_schema()::text",
                &[],
            )
            .await?;
            Ok(format!("postgres:{}/{}/{}", col::<String>(&row, 0)?, col::<String>(&row, 1)?, col::<String>(&row, 2)?))
        })
    }

    async fn table_columns(&self, table: &'static Table) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
        crate::read!(self.engine, |tx| {
            let rows = all(
                &tx,
                "SELECT column_name::text, data_type::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                &[&table.name],
            )
            .await?;
            rows.iter().map(|r| Ok((col::<String>(r, 0)?, kind_of(&col::<String>(r, 1)?)))).collect()
        })
    }

    async fn count_rows(&self, table: &'static Table) -> Result<u64, StoreError> {
        crate::read!(self.engine, |tx| {
            let row = one(&tx, &format!("SELECT count(*) FROM {}", quoted(table.name)), &[]).await?;
            Ok(col::<i64>(&row, 0)?.try_into().unwrap_or_default())
        })
    }

    async fn read_rows(
        &self,
        table: &'static Table,
        after: Option<Vec<Cell>>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        let sql = select_sql(table, after.is_some(), limit);
        let positions = table.key_positions();
        crate::read!(self.engine, |tx| {
            let stmt = tx.prepare_cached(&sql).await.map_err(backend)?;
            let params = match &after {
                Some(key) => key
                    .iter()
                    .zip(&positions)
                    .zip(stmt.params())
                    .map(|((c, &i), ty)| param(table, i, c, ty))
                    .collect::<Result<_, _>>()?,
                None => Vec::new(),
            };
            let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p: &Param<'_>| &**p as _).collect();
            let rows = tx.query(&stmt, &params).await.map_err(backend)?;
            rows.iter().map(|r| (0..table.columns.len()).map(|i| cell(table, r, i)).collect()).collect()
        })
    }

    async fn write_rows(&self, table: &'static Table, rows: Vec<Row>) -> Result<(), StoreError> {
        let per_statement = (MAX_PARAMS / table.columns.len()).max(1);
        crate::write!(self.engine, |tx| {
            for chunk in rows.chunks(per_statement) {
                let stmt = tx.prepare_cached(&insert_sql(table, chunk.len())).await.map_err(backend)?;
                let params = chunk
                    .iter()
                    .flat_map(|row| row.iter().enumerate())
                    .zip(stmt.params())
                    .map(|((i, c), ty)| param(table, i, c, ty))
                    .collect::<Result<Vec<_>, _>>()?;
                let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p: &Param<'_>| &**p as _).collect();
                tx.execute(&stmt, &params).await.map_err(backend)?;
            }
            Ok(())
        })
    }

    async fn empty_tables(&self) -> Result<(), StoreError> {
        let names: Vec<String> = TABLES.iter().map(|t| quoted(t.name)).collect();
        let sql = format!("TRUNCATE {} RESTART IDENTITY", names.join(", "));
        crate::write!(self.engine, |tx| exec(&tx, &sql, &[]).await.map(drop))
    }

    async fn finish_copy(&self) -> Result<(), StoreError> {
        crate::write!(self.engine, |tx| {
            for table in TABLES.iter().filter(|t| t.has_seq()) {
                let sql = format!(
                    "SELECT setval(pg_get_serial_sequence($1, 'seq'), COALESCE(max(seq), 0) + 1, false) FROM {}",
                    quoted(table.name)
                );
                one(&tx, &sql, &[&quoted(table.name)]).await?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use mnemo_store::copy::{Side, check_schema};

    use super::*;
    use crate::PostgresSettings;

    /// A store in a fresh schema of the test database.
    async fn fresh() -> PostgresStore {
        // The suite's helpers return this crate's types as another instance of it (the suite
        // depends on this crate), so only its strings are used here.
        let schema = mnemo_store_tests::Postgres::fresh_schema().await;
        let mut settings = PostgresSettings::from_url(&mnemo_store_tests::Postgres::url()).unwrap();
        settings.config.options(format!("-c search_path={schema}"));
        settings.pool_size = 2;
        PostgresStore::open(&settings).await.unwrap()
    }

    fn table(name: &str) -> &'static Table {
        TABLES.iter().find(|t| t.name == name).unwrap()
    }

    #[tokio::test]
    async fn the_schema_is_the_one_copies_know_and_rows_round_trip() {
        // A migration that adds a column must teach `mnemo_store::copy::TABLES` about it.
        let store = fresh().await;
        check_schema(&store, Side::Target).await.unwrap();
        let other = fresh().await;
        assert_ne!(store.database_identity().await.unwrap(), other.database_identity().await.unwrap());

        let envs = table("environments");
        let env = |seq: i64| {
            vec![
                Cell::Int(seq),
                Cell::Text(format!("env_{seq}")),
                Cell::Text("e".into()),
                Cell::Null,
                Cell::Text("{}".into()),
                Cell::Text("{\"type\":\"self_hosted\"}".into()),
                Cell::Null,
                Cell::Int(1),
                Cell::Int(2),
                Cell::Null,
                Cell::Text("wrkspc_a".into()),
            ]
        };
        store.write_rows(envs, vec![env(4), env(9)]).await.unwrap();
        let polls = table("worker_polls");
        let poll = |worker: &str| vec![Cell::Int(4), Cell::Text(worker.into()), Cell::Int(-9)];
        // Written out of order; read back in byte order of the worker id, whatever the
        // database's collation.
        store.write_rows(polls, vec![poll("é"), poll("a"), poll("Z"), poll("b")]).await.unwrap();
        assert_eq!(store.count_rows(polls).await.unwrap(), 4);
        let first = store.read_rows(polls, None, 3).await.unwrap();
        assert_eq!(first, vec![poll("Z"), poll("a"), poll("b")]);
        assert_eq!(store.read_rows(polls, Some(polls.key_of(&first[2])), 3).await.unwrap(), vec![poll("é")]);

        let flags = table("session_memory_stores");
        let sessions = table("sessions");
        let session = vec![
            Cell::Int(3),
            Cell::Text("sesn_1".into()),
            Cell::Text("env_4".into()),
            Cell::Text("agent_1".into()),
            Cell::Text("{}".into()),
            Cell::Text("idle".into()),
            Cell::Int(1),
            Cell::Int(1),
            Cell::Null,
            // No turn lease held.
            Cell::Null,
            Cell::Null,
            Cell::Text("wrkspc_a".into()),
        ];
        store.write_rows(sessions, vec![session]).await.unwrap();
        let flag = |store: &str, ro: i64| vec![Cell::Int(3), Cell::Text(store.into()), Cell::Int(ro)];
        store.write_rows(flags, vec![flag("memstore_b", 0), flag("memstore_a", 1)]).await.unwrap();
        assert_eq!(store.read_rows(flags, None, 10).await.unwrap(), vec![flag("memstore_a", 1), flag("memstore_b", 0)]);

        // Memory content is kept as bytes (TEXT refuses U+0000) and travels as text.
        let stores = table("memory_stores");
        let versions = table("memory_versions");
        let text = |s: &str| Cell::Text(s.into());
        store
            .write_rows(
                stores,
                vec![vec![
                    Cell::Int(1),
                    text("memstore_1"),
                    text("s"),
                    text(""),
                    text("{}"),
                    Cell::Int(1),
                    Cell::Int(1),
                    Cell::Null,
                    Cell::Int(0),
                    text("wrkspc_a"),
                    Cell::Null,
                ]],
            )
            .await
            .unwrap();
        let version = |seq: i64, content: Cell| {
            let mut row = vec![Cell::Null; versions.columns.len()];
            row[..5].clone_from_slice(&[
                Cell::Int(seq),
                text(&format!("memver_{seq}")),
                Cell::Int(1),
                text("mem_1"),
                text("created"),
            ]);
            row[8] = Cell::Int(1);
            row[14] = content;
            row
        };
        let odd = vec![version(1, text("nul \0 and é")), version(2, Cell::Null)];
        store.write_rows(versions, odd.clone()).await.unwrap();
        assert_eq!(store.read_rows(versions, None, 10).await.unwrap(), odd);

        // After the copy, the database numbers new rows past the copied `seq`.
        store.finish_copy().await.unwrap();
        let ws = mnemo_store::Operations::default_workspace(&store).await.unwrap();
        let created = mnemo_store::Operations::create_environment(
            &store,
            &ws,
            mnemo_store::NewEnvironment {
                name: "next".into(),
                description: None,
                metadata: Default::default(),
                config: serde_json::json!({"type": "self_hosted"}),
                scope: None,
            },
        )
        .await
        .unwrap();
        let rows = store.read_rows(envs, Some(vec![Cell::Int(9)]), 10).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], Cell::Int(10));
        assert_eq!(rows[0][1], Cell::Text(created.id.to_string()));

        store.empty_tables().await.unwrap();
        for t in TABLES {
            assert_eq!(store.count_rows(t).await.unwrap(), 0, "{}", t.name);
        }
    }

    #[test]
    fn statements_are_built_for_the_table() {
        let polls = TABLES.iter().find(|t| t.name == "worker_polls").unwrap();
        assert_eq!(
            select_sql(polls, true, 10),
            "SELECT \"environment_seq\", \"worker_id\", \"last_poll_at\" FROM \"worker_polls\" \
             WHERE (\"environment_seq\", \"worker_id\" COLLATE \"C\") > ($1, $2) \
             ORDER BY \"environment_seq\", \"worker_id\" COLLATE \"C\" LIMIT 10"
        );
        let keys = TABLES.iter().find(|t| t.name == "api_keys").unwrap();
        assert!(
            select_sql(keys, true, 5).ends_with(" FROM \"api_keys\" WHERE (\"seq\") > ($1) ORDER BY \"seq\" LIMIT 5")
        );
        assert!(select_sql(keys, false, 5).ends_with(" FROM \"api_keys\" ORDER BY \"seq\" LIMIT 5"));
        assert_eq!(
            insert_sql(polls, 2),
            "INSERT INTO \"worker_polls\" (\"environment_seq\", \"worker_id\", \"last_poll_at\") \
             VALUES ($1, $2, $3), ($4, $5, $6)"
        );
    }
}
