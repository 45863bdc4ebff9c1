//! The digest, the table list and [`run`] against databases in memory.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

fn table(name: &str) -> &'static Table {
    TABLES.iter().find(|t| t.name == name).unwrap()
}

fn text(s: &str) -> Cell {
    Cell::Text(s.into())
}

fn api_key(seq: i64, label: &str) -> Row {
    vec![
        Cell::Int(seq),
        text(&format!("apikey_{seq}")),
        Cell::Bytes(vec![seq as u8; 32]),
        text(label),
        Cell::Int(7),
        Cell::Null,
        text("wrkspc_default"),
        text("active"),
        Cell::Null,
        Cell::Null,
        Cell::Null,
    ]
}

fn digest_of(name: &str, rows: &[Row]) -> Result<Summary, String> {
    let mut d = Digest::new(table(name));
    for row in rows {
        d.add(row)?;
    }
    Ok(d.finish())
}

#[test]
fn the_digest_of_a_table_is_pinned() {
    // The encoding is a contract between two runs of mnemo (and two versions of it): a
    // change to it must be deliberate.
    let empty = digest_of("api_keys", &[]).unwrap();
    assert_eq!(empty.rows, 0);
    assert_eq!(empty.hex(), hex::encode(Sha256::digest(b"mnemo-copy-v1\0api_keys\0")));

    let mut expected = Sha256::new();
    expected.update(b"mnemo-copy-v1\0api_keys\0");
    expected.update([1, 0, 0, 0, 0, 0, 0, 0, 1]);
    expected.update([2, 0, 0, 0, 0, 0, 0, 0, 8]);
    expected.update(b"apikey_1");
    expected.update([3, 0, 0, 0, 0, 0, 0, 0, 32]);
    expected.update([1; 32]);
    expected.update([2, 0, 0, 0, 0, 0, 0, 0, 1]);
    expected.update(b"k");
    expected.update([1, 0, 0, 0, 0, 0, 0, 0, 7]);
    expected.update([0]);
    expected.update([2, 0, 0, 0, 0, 0, 0, 0, 14]);
    expected.update(b"wrkspc_default");
    expected.update([2, 0, 0, 0, 0, 0, 0, 0, 6]);
    expected.update(b"active");
    expected.update([0, 0, 0]);
    let one = digest_of("api_keys", &[api_key(1, "k")]).unwrap();
    assert_eq!(one, Summary { rows: 1, sha256: expected.finalize().into() });
}

#[test]
fn any_change_to_a_cell_changes_the_digest() {
    let base = digest_of("api_keys", &[api_key(1, "a"), api_key(2, "b")]).unwrap();
    let mut variants = Vec::new();
    let mut label = vec![api_key(1, "a"), api_key(2, "b")];
    label[1][3] = text("c");
    variants.push(label);
    let mut null_vs_zero = vec![api_key(1, "a"), api_key(2, "b")];
    null_vs_zero[0][5] = Cell::Int(0);
    variants.push(null_vs_zero);
    let mut seq = vec![api_key(1, "a"), api_key(3, "b")];
    seq[1][1] = text("apikey_2");
    seq[1][2] = Cell::Bytes(vec![2; 32]);
    variants.push(seq);
    variants.push(vec![api_key(1, "a")]);
    for rows in variants {
        assert_ne!(digest_of("api_keys", &rows).unwrap().sha256, base.sha256, "{rows:?}");
    }
    // Each cell carries its length: moving bytes between neighbouring cells shows.
    let split = |a: &str, b: &str| {
        digest_of(
            "worker_polls",
            &[vec![Cell::Int(1), text(a), Cell::Int(0)], vec![Cell::Int(1), text(b), Cell::Int(0)]],
        )
    };
    assert_ne!(split("a", "bc").unwrap(), split("ab", "c").unwrap());
    // Text and bytes with the same bytes differ.
    let mut as_bytes = api_key(1, "a");
    as_bytes[1] = Cell::Bytes(b"apikey_1".to_vec());
    assert!(digest_of("api_keys", &[as_bytes]).is_err(), "the kind is checked before hashing");
}

#[test]
fn rows_out_of_key_order_or_of_the_wrong_shape_are_refused() {
    let err = digest_of("api_keys", &[api_key(2, "a"), api_key(1, "b")]).unwrap_err();
    assert!(err.contains("out of key order"), "{err}");
    assert!(digest_of("api_keys", &[api_key(1, "a"), api_key(1, "a")]).unwrap_err().contains("out of key order"));
    // Composite keys compare column by column, text by its bytes.
    let polls = |worker: &str, env: i64| vec![Cell::Int(env), text(worker), Cell::Int(0)];
    assert!(digest_of("worker_polls", &[polls("b", 1), polls("a", 2), polls("Z", 3)]).is_ok());
    assert!(digest_of("worker_polls", &[polls("a", 1), polls("Z", 1)]).is_err(), "'Z' < 'a' in bytes");
    assert!(digest_of("worker_polls", &[polls("Z", 1), polls("a", 1), polls("é", 1)]).is_ok());

    let mut short = api_key(1, "a");
    short.pop();
    assert_eq!(digest_of("api_keys", &[short]).unwrap_err(), "10 values for 11 columns");
    let mut null = api_key(1, "a");
    null[3] = Cell::Null;
    assert!(digest_of("api_keys", &[null]).unwrap_err().contains("column `label`"));
    let flag = |v: i64| vec![Cell::Int(1), text("memstore_x"), Cell::Int(v)];
    assert!(digest_of("session_memory_stores", &[flag(1)]).is_ok());
    assert!(digest_of("session_memory_stores", &[flag(2)]).unwrap_err().contains("`read_only` (Bool)"));
}

#[test]
fn the_table_list_is_consistent() {
    let mut names = std::collections::HashSet::new();
    for t in TABLES {
        assert!(names.insert(t.name), "{} twice", t.name);
        assert!(!t.key.is_empty());
        for k in t.key_columns() {
            assert!(!k.nullable, "{}.{} is a nullable key", t.name, k.name);
        }
        let columns: Vec<_> = t.columns.iter().map(|c| (c.name.to_owned(), Some(c.kind))).collect();
        assert_eq!(t.check_columns(&columns), Ok(()));
    }
    assert_eq!(names.len(), 31);
    for seeded in SEEDED {
        assert!(names.contains(seeded), "{seeded}");
    }
}

#[test]
fn a_database_with_other_columns_is_named_precisely() {
    let t = table("session_memory_stores");
    let sqlite = [("session_seq", Int), ("memory_store_id", Text), ("read_only", Int)];
    let sqlite: Vec<_> = sqlite.iter().map(|(n, k)| ((*n).to_owned(), Some(*k))).collect();
    assert_eq!(t.check_columns(&sqlite), Ok(()), "a boolean may be an integer");
    let mut as_bytes = sqlite.clone();
    as_bytes[1].1 = Some(Bytes);
    assert_eq!(t.check_columns(&as_bytes), Ok(()), "text may be kept as its UTF-8");
    as_bytes[1].1 = Some(Int);
    assert!(t.check_columns(&as_bytes).is_err());
    let mut extra = sqlite.clone();
    extra.push(("expires_at".into(), Some(Int)));
    assert_eq!(
        t.check_columns(&extra).unwrap_err(),
        "column `expires_at` is unknown to this mnemo (it would not be copied)"
    );
    let mut odd = sqlite[..2].to_vec();
    odd[0].1 = None;
    assert_eq!(
        t.check_columns(&odd).unwrap_err(),
        "column `session_seq` is of an unknown type, not Int; column `read_only` is missing"
    );
    assert_eq!(t.check_columns(&[]).unwrap_err(), "the table does not exist");
}

/// A database in memory: each table a map from key to row.
#[derive(Default)]
struct Fake {
    name: &'static str,
    tables: Mutex<BTreeMap<&'static str, BTreeMap<Vec<Cell>, Row>>>,
    /// Writes change the last cell of every text row they store.
    corrupt: bool,
    /// The next read of `api_keys` adds a row first (a server still writing).
    grow_once: AtomicBool,
    finished: AtomicBool,
}

impl Fake {
    fn named(name: &'static str) -> Self {
        Self { name, ..Self::default() }
    }

    fn insert(&self, table: &'static str, row: Row) {
        let key = super::tests::table(table).key_of(&row);
        self.tables.lock().unwrap().entry(table).or_default().insert(key, row);
    }

    fn rows(&self, table: &'static str) -> Vec<Row> {
        self.tables.lock().unwrap().get(table).map(|t| t.values().cloned().collect()).unwrap_or_default()
    }
}

#[async_trait]
impl RowAccess for Fake {
    fn backend_name(&self) -> &'static str {
        "fake"
    }
    async fn database_identity(&self) -> Result<String, StoreError> {
        Ok(self.name.into())
    }
    async fn table_columns(&self, table: &'static Table) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
        Ok(table.columns.iter().map(|c| (c.name.to_owned(), Some(c.kind))).collect())
    }
    async fn count_rows(&self, table: &'static Table) -> Result<u64, StoreError> {
        Ok(self.rows(table.name).len() as u64)
    }
    async fn read_rows(
        &self,
        table: &'static Table,
        after: Option<Vec<Cell>>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        if table.name == "api_keys" && after.is_none() && self.grow_once.swap(false, Ordering::SeqCst) {
            self.insert("api_keys", api_key(99, "late"));
        }
        let tables = self.tables.lock().unwrap();
        let Some(rows) = tables.get(table.name) else { return Ok(Vec::new()) };
        Ok(rows
            .iter()
            .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
            .take(limit)
            .map(|(_, r)| r.clone())
            .collect())
    }
    async fn write_rows(&self, table: &'static Table, rows: Vec<Row>) -> Result<(), StoreError> {
        for mut row in rows {
            if self.corrupt && table.name == "api_keys" {
                row[3] = text("mangled");
            }
            if self.tables.lock().unwrap().get(table.name).is_some_and(|t| t.contains_key(&table.key_of(&row))) {
                return Err(StoreError::Invalid("duplicate key".into()));
            }
            self.insert(table.name, row);
        }
        Ok(())
    }
    async fn empty_tables(&self) -> Result<(), StoreError> {
        self.tables.lock().unwrap().clear();
        Ok(())
    }
    async fn finish_copy(&self) -> Result<(), StoreError> {
        self.finished.store(true, Ordering::SeqCst);
        Ok(())
    }
}

fn filled(name: &'static str, keys: i64) -> Fake {
    let fake = Fake::named(name);
    for seq in 1..=keys {
        fake.insert("api_keys", api_key(seq, &format!("key {seq}")));
    }
    fake.insert("worker_polls", vec![Cell::Int(1), text("w2"), Cell::Int(5)]);
    fake.insert("worker_polls", vec![Cell::Int(1), text("w1"), Cell::Int(6)]);
    fake.insert("session_memory_stores", vec![Cell::Int(3), text("memstore_a"), Cell::Int(1)]);
    fake
}

#[derive(Default)]
struct Counted(Mutex<Vec<(Phase, u64)>>, std::sync::atomic::AtomicU64);

impl Progress for Counted {
    fn phase(&self, phase: Phase, rows: u64) {
        self.0.lock().unwrap().push((phase, rows));
    }
    fn advance(&self, rows: u64) {
        self.1.fetch_add(rows, Ordering::SeqCst);
    }
}

fn small_pages() -> Options {
    Options { replace: false, page_rows: 2 }
}

#[tokio::test]
async fn a_copy_moves_every_row_in_pages_and_reports_each_table() {
    let (from, to) = (filled("a", 5), Fake::named("b"));
    let progress = Counted::default();
    let report = run(&from, &to, small_pages(), &progress).await.unwrap();
    for t in ["api_keys", "worker_polls", "session_memory_stores"] {
        assert_eq!(to.rows(t), from.rows(t), "{t}");
    }
    assert_eq!(report.tables.len(), TABLES.len());
    assert_eq!(report.total_rows(), 8);
    let keys = report.tables.iter().find(|t| t.table == "api_keys").unwrap();
    assert_eq!((keys.table, keys.summary), ("api_keys", digest_of("api_keys", &from.rows("api_keys")).unwrap()));
    assert!(to.finished.load(Ordering::SeqCst));
    assert_eq!(*progress.0.lock().unwrap(), [(Phase::Copy, 8), (Phase::Verify, 16)]);
    assert_eq!(progress.1.load(Ordering::SeqCst), 24);
}

/// What a database holds once migrated: its organization and Default workspace.
fn born(name: &'static str) -> Fake {
    let fake = Fake::named(name);
    fake.insert("organization", vec![text(&format!("org of {name}")), text("mnemo"), Cell::Int(1)]);
    fake.insert(
        "workspaces",
        vec![
            Cell::Int(1),
            text(&format!("wrkspc_{name}")),
            text("Default"),
            text("#6C5BB9"),
            text("{}"),
            text("{}"),
            Cell::Int(1),
            Cell::Int(1),
            Cell::Null,
        ],
    );
    fake
}

#[tokio::test]
async fn a_new_target_takes_the_source_organization_and_workspaces() {
    let from = born("a");
    from.insert("api_keys", api_key(1, "k"));
    let to = born("b");
    run(&from, &to, small_pages(), &()).await.unwrap();
    for t in ["organization", "workspaces", "api_keys"] {
        assert_eq!(to.rows(t), from.rows(t), "{t}");
    }
}

#[tokio::test]
async fn a_non_empty_target_is_refused_unless_replaced() {
    let from = filled("a", 3);
    let to = filled("b", 1);
    to.insert("api_keys", api_key(7, "stale"));
    let err = run(&from, &to, small_pages(), &()).await.unwrap_err();
    assert!(matches!(err, CopyError::TargetNotEmpty { table: "api_keys", rows: 2 }), "{err:?}");
    assert!(err.to_string().contains("pass --replace"), "{err}");
    assert_eq!(to.rows("api_keys").len(), 2, "a refused copy writes nothing");

    run(&from, &to, Options { replace: true, ..small_pages() }, &()).await.unwrap();
    assert_eq!(to.rows("api_keys"), from.rows("api_keys"), "the stale row is gone");
}

#[tokio::test]
async fn one_database_an_empty_source_and_a_changing_source_are_refused() {
    let same = run(&filled("a", 1), &Fake::named("a"), small_pages(), &()).await.unwrap_err();
    assert!(matches!(same, CopyError::SameDatabase), "{same:?}");

    let empty = run(&Fake::named("a"), &Fake::named("b"), small_pages(), &()).await.unwrap_err();
    assert!(matches!(empty, CopyError::EmptySource), "{empty:?}");
    // A new database has its organization and Default workspace, and nothing else to copy.
    let empty = run(&born("a"), &Fake::named("b"), small_pages(), &()).await.unwrap_err();
    assert!(matches!(empty, CopyError::EmptySource), "{empty:?}");

    let from = filled("a", 3);
    let to = Fake::named("b");
    // The copy reads `api_keys` first; a row appears before verification reads it again.
    let changing = Changing { inner: &from, reads: Mutex::new(0) };
    let err = run(&changing, &to, small_pages(), &()).await.unwrap_err();
    match &err {
        CopyError::SourceChanged { table: "api_keys", copied, now } => {
            assert_eq!((copied.rows, now.rows), (3, 4));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("stop every server using the source"), "{err}");
}

/// Adds a row to `api_keys` once the copy has read it through.
struct Changing<'a> {
    inner: &'a Fake,
    reads: Mutex<u32>,
}

#[async_trait]
impl RowAccess for Changing<'_> {
    fn backend_name(&self) -> &'static str {
        "fake"
    }
    async fn database_identity(&self) -> Result<String, StoreError> {
        self.inner.database_identity().await
    }
    async fn table_columns(&self, table: &'static Table) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
        self.inner.table_columns(table).await
    }
    async fn count_rows(&self, table: &'static Table) -> Result<u64, StoreError> {
        self.inner.count_rows(table).await
    }
    async fn read_rows(
        &self,
        table: &'static Table,
        after: Option<Vec<Cell>>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        if table.name == "worker_polls" {
            let mut reads = self.reads.lock().unwrap();
            *reads += 1;
            if *reads == 1 {
                self.inner.grow_once.store(true, Ordering::SeqCst);
            }
        }
        self.inner.read_rows(table, after, limit).await
    }
    async fn write_rows(&self, table: &'static Table, rows: Vec<Row>) -> Result<(), StoreError> {
        self.inner.write_rows(table, rows).await
    }
    async fn empty_tables(&self) -> Result<(), StoreError> {
        self.inner.empty_tables().await
    }
    async fn finish_copy(&self) -> Result<(), StoreError> {
        self.inner.finish_copy().await
    }
}

#[tokio::test]
async fn a_target_that_stores_something_else_fails_verification_naming_the_table() {
    let from = filled("a", 3);
    let to = Fake { corrupt: true, ..Fake::named("b") };
    let err = run(&from, &to, small_pages(), &()).await.unwrap_err();
    match &err {
        CopyError::Mismatch { table: "api_keys", expected, found } => {
            assert_eq!((expected.rows, found.rows), (3, 3));
            assert_ne!(expected.sha256, found.sha256);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().starts_with("verification failed: table `api_keys` differs"), "{err}");
}
