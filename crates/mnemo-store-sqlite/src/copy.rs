//! Row-level access for `mnemo db copy` ([`mnemo_store::copy`]): reads on the read pool, each
//! batch of rows one write job of the writer thread.
//!
//! SQLite orders text by its bytes (the `BINARY` collation), which is the order copy keys
//! compare in; a boolean is an `INTEGER` 0 or 1 here already. Values are read by what they
//! hold, not by what the column declares, except that bytes in a text column are decoded.

use async_trait::async_trait;
use mnemo_store::StoreError;
use mnemo_store::copy::{Cell, Kind, Row, RowAccess, TABLES, Table};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use crate::SqliteStore;
use crate::engine::{backend, failure};

/// A cell as an SQLite value.
struct Value<'a>(&'a Cell);

impl ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Cell::Null => ValueRef::Null,
            Cell::Int(v) => ValueRef::Integer(*v),
            Cell::Text(s) => ValueRef::Text(s.as_bytes()),
            Cell::Bytes(b) => ValueRef::Blob(b),
        }))
    }
}

fn cell(table: &Table, i: usize, value: ValueRef<'_>) -> Result<Cell, StoreError> {
    Ok(match value {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(v) => Cell::Int(v),
        ValueRef::Text(t) => utf8(table, i, t)?,
        ValueRef::Blob(b) if table.columns[i].kind == Kind::Text => utf8(table, i, b)?,
        ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
        ValueRef::Real(_) => {
            return Err(failure(format!("`{}`.`{}` holds a floating-point value", table.name, table.columns[i].name)));
        }
    })
}

fn utf8(table: &Table, i: usize, bytes: &[u8]) -> Result<Cell, StoreError> {
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| failure(format!("`{}`.`{}` holds text that is not UTF-8", table.name, table.columns[i].name)))?;
    Ok(Cell::Text(text))
}

fn column_list(table: &Table) -> String {
    table.columns.iter().map(|c| format!("\"{}\"", c.name)).collect::<Vec<_>>().join(", ")
}

/// `SELECT … FROM table [WHERE (key) > (?…)] ORDER BY key LIMIT n`.
fn select_sql(table: &Table, after: bool, limit: usize) -> String {
    let key: Vec<String> = table.key.iter().map(|k| format!("\"{k}\"")).collect();
    let key = key.join(", ");
    let filter = if after {
        let marks: Vec<String> = (1..=table.key.len()).map(|i| format!("?{i}")).collect();
        format!(" WHERE ({key}) > ({})", marks.join(", "))
    } else {
        String::new()
    };
    format!("SELECT {} FROM \"{}\"{filter} ORDER BY {key} LIMIT {limit}", column_list(table), table.name)
}

fn read_page(c: &Connection, table: &Table, after: Option<&[Cell]>, limit: usize) -> Result<Vec<Row>, StoreError> {
    let sql = select_sql(table, after.is_some(), limit);
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let params: Vec<Value<'_>> = after.unwrap_or_default().iter().map(Value).collect();
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).map_err(backend)?;
    let mut out = Vec::with_capacity(limit.min(1024));
    while let Some(row) = rows.next().map_err(backend)? {
        let cells = (0..table.columns.len())
            .map(|i| cell(table, i, row.get_ref(i).map_err(backend)?))
            .collect::<Result<Row, _>>()?;
        out.push(cells);
    }
    Ok(out)
}

#[async_trait]
impl RowAccess for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn database_identity(&self) -> Result<String, StoreError> {
        let path = self.path().to_owned();
        let real = std::fs::canonicalize(&path).map_err(|e| failure(format!("resolve {}: {e}", path.display())))?;
        Ok(format!("sqlite:{}", real.display()))
    }

    async fn table_columns(&self, table: &'static Table) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
        self.engine
            .read(move |c| {
                let mut stmt = c.prepare("SELECT name, type FROM pragma_table_info(?1)").map_err(backend)?;
                let rows = stmt
                    .query_map([table.name], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                    .map_err(backend)?;
                rows.map(|r| {
                    let (name, declared) = r.map_err(backend)?;
                    let kind = match declared.to_ascii_uppercase().as_str() {
                        "INTEGER" => Some(Kind::Int),
                        "TEXT" => Some(Kind::Text),
                        "BLOB" => Some(Kind::Bytes),
                        _ => None,
                    };
                    Ok((name, kind))
                })
                .collect()
            })
            .await
    }

    async fn count_rows(&self, table: &'static Table) -> Result<u64, StoreError> {
        self.engine
            .read(move |c| {
                let n: i64 = c
                    .query_row(&format!("SELECT count(*) FROM \"{}\"", table.name), [], |r| r.get(0))
                    .map_err(backend)?;
                Ok(n.try_into().unwrap_or_default())
            })
            .await
    }

    async fn read_rows(
        &self,
        table: &'static Table,
        after: Option<Vec<Cell>>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        self.engine.read(move |c| read_page(c, table, after.as_deref(), limit)).await
    }

    async fn write_rows(&self, table: &'static Table, rows: Vec<Row>) -> Result<(), StoreError> {
        self.engine
            .write(move |c| {
                let marks: Vec<String> = (1..=table.columns.len()).map(|i| format!("?{i}")).collect();
                let sql =
                    format!("INSERT INTO \"{}\" ({}) VALUES ({})", table.name, column_list(table), marks.join(", "));
                let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
                for row in &rows {
                    stmt.execute(rusqlite::params_from_iter(row.iter().map(Value))).map_err(backend)?;
                }
                Ok(())
            })
            .await
    }

    async fn empty_tables(&self) -> Result<(), StoreError> {
        self.engine
            .write(|c| {
                for table in TABLES.iter().rev() {
                    c.execute(&format!("DELETE FROM \"{}\"", table.name), []).map_err(backend)?;
                }
                Ok(())
            })
            .await
    }

    async fn finish_copy(&self) -> Result<(), StoreError> {
        // `INTEGER PRIMARY KEY` numbers new rows past the largest present: nothing to move.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use mnemo_store::copy::{Side, check_schema};

    use super::*;
    use crate::{Durability, SqliteSettings};

    fn open(dir: &std::path::Path, name: &str) -> SqliteStore {
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/{name}", dir.display())).unwrap();
        settings.durability = Durability::Normal;
        SqliteStore::open(&settings).unwrap()
    }

    fn table(name: &str) -> &'static Table {
        TABLES.iter().find(|t| t.name == name).unwrap()
    }

    #[tokio::test]
    async fn the_schema_is_the_one_copies_know() {
        // A migration that adds a column must teach `mnemo_store::copy::TABLES` about it.
        let dir = tempfile::tempdir().unwrap();
        check_schema(&open(dir.path(), "db.sqlite"), Side::Source).await.unwrap();
    }

    #[tokio::test]
    async fn rows_round_trip_in_key_order_page_by_page() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), "db.sqlite");
        let polls = table("worker_polls");
        let envs = table("environments");
        let env = vec![
            Cell::Int(4),
            Cell::Text("env_1".into()),
            Cell::Text("e".into()),
            Cell::Null,
            Cell::Text("{}".into()),
            Cell::Text("{\"type\":\"self_hosted\"}".into()),
            Cell::Null,
            Cell::Int(1),
            Cell::Int(2),
            Cell::Null,
            Cell::Text("wrkspc_a".into()),
        ];
        store.write_rows(envs, vec![env.clone()]).await.unwrap();
        let poll = |worker: &str| vec![Cell::Int(4), Cell::Text(worker.into()), Cell::Int(9)];
        // Written out of order; read back in byte order of the worker id.
        store.write_rows(polls, vec![poll("é"), poll("a"), poll("Z"), poll("b")]).await.unwrap();
        assert_eq!(store.count_rows(polls).await.unwrap(), 4);
        let first = store.read_rows(polls, None, 3).await.unwrap();
        assert_eq!(first, vec![poll("Z"), poll("a"), poll("b")]);
        let rest = store.read_rows(polls, Some(polls.key_of(&first[2])), 3).await.unwrap();
        assert_eq!(rest, vec![poll("é")]);
        assert_eq!(store.read_rows(envs, None, 10).await.unwrap(), vec![env]);

        // The database numbers new rows past the copied `seq`.
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
        let rows = store.read_rows(envs, Some(vec![Cell::Int(4)]), 10).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], Cell::Int(5));
        assert_eq!(rows[0][1], Cell::Text(created.id.to_string()));

        store.empty_tables().await.unwrap();
        for t in TABLES {
            assert_eq!(store.count_rows(t).await.unwrap(), 0, "{}", t.name);
        }
    }

    #[tokio::test]
    async fn a_file_reached_by_two_paths_is_one_database() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), "db.sqlite");
        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).unwrap();
        let b = open(&dir.path().join("link"), "db.sqlite");
        let c = open(dir.path(), "other.sqlite");
        assert_eq!(a.database_identity().await.unwrap(), b.database_identity().await.unwrap());
        assert_ne!(a.database_identity().await.unwrap(), c.database_identity().await.unwrap());
    }
}
