//! `mnemo db backup` for SQLite: a consistent copy of a database a server may be writing to,
//! through SQLite's online backup API.
//!
//! The copy is of one snapshot. The source connection opens a read transaction before the
//! first step and holds it to the last, so every page comes from the same committed state.
//! Without it SQLite restarts the copy whenever another connection commits between two steps,
//! and a server that keeps writing would keep a stepped backup from ever finishing. In WAL
//! mode a reader never blocks the writer; the server only cannot checkpoint past the snapshot
//! until the copy ends (its log grows meanwhile). Steps of [`BackupOptions::pages_per_step`]
//! pages with a short pause between them keep the copy from hogging the disk.
//!
//! The pages go to a temporary file beside the target, which is switched to a rollback
//! journal (one self-contained file, no `-wal` or `-shm` needed to read it), checked with
//! [`check`], flushed to disk and only then renamed over the target (whose directory is
//! flushed too). A failed backup leaves no file behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::backup::{Backup, StepResult};

use crate::check::{CheckError, CheckReport, check, open_existing};

/// How a backup runs.
#[derive(Debug, Clone)]
pub struct BackupOptions {
    /// Replace an existing target.
    pub force: bool,
    /// Pages copied per step.
    pub pages_per_step: u32,
    /// The pause between two steps.
    pub pause: Duration,
}

impl Default for BackupOptions {
    fn default() -> Self {
        // 4 MiB of 4 KiB pages a step: a 1 GiB database takes 256 steps, 0.5 s of pauses.
        Self { force: false, pages_per_step: 1024, pause: Duration::from_millis(2) }
    }
}

/// What a backup did.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub source: PathBuf,
    pub target: PathBuf,
    /// Pages copied.
    pub pages: u64,
    /// Steps taken.
    pub steps: u64,
    /// The check of the copy (its path is the target's).
    pub check: CheckReport,
}

/// Why a backup failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("there is no SQLite database at {}", .0.display())]
    NoSource(PathBuf),
    #[error("{} exists; pass --force to replace it", .0.display())]
    TargetExists(PathBuf),
    #[error("{} is a directory; name the backup file", .0.display())]
    TargetIsDirectory(PathBuf),
    #[error("the target {} is the source database itself", .0.display())]
    SameFile(PathBuf),
    #[error(
        "{} exists beside the target: a database there is in use or was not closed cleanly; stop what uses it, \
         remove the -wal and -shm files, then try again",
        .0.display()
    )]
    LogBesideTarget(PathBuf),
    #[error("the copy failed its check ({} problems): {}", .0.findings.problems().len(), .0.findings.problems().join("; "))]
    CopyUnhealthy(Box<CheckReport>),
    #[error("{doing}: {source}")]
    Sqlite { doing: String, source: rusqlite::Error },
    #[error("{doing}: {source}")]
    Io { doing: String, source: std::io::Error },
    #[error(transparent)]
    Check(#[from] CheckError),
}

impl BackupError {
    fn sqlite(doing: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Self {
        let doing = doing.into();
        move |source| Self::Sqlite { doing, source }
    }

    fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let doing = doing.into();
        move |source| Self::Io { doing, source }
    }
}

/// `path` with `suffix` appended to its file name (`db.sqlite` → `db.sqlite-wal`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes a temporary database (and its side files) unless it was kept.
struct Temporary {
    path: PathBuf,
    keep: bool,
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.keep {
            for suffix in ["", "-journal", "-wal", "-shm"] {
                let _ = std::fs::remove_file(with_suffix(&self.path, suffix));
            }
        }
    }
}

/// Copies the database at `source` into a new file at `target`, consistently, while other
/// connections (a running `mnemo serve`) keep writing to it.
pub fn backup(source: &Path, target: &Path, options: &BackupOptions) -> Result<BackupReport, BackupError> {
    backup_with(source, target, options, &mut |_| {})
}

/// [`backup`], calling `between_steps` with the number of steps taken after each step that
/// leaves more to copy.
pub(crate) fn backup_with(
    source: &Path,
    target: &Path,
    options: &BackupOptions,
    between_steps: &mut dyn FnMut(u64),
) -> Result<BackupReport, BackupError> {
    if !source.is_file() {
        return Err(BackupError::NoSource(source.to_owned()));
    }
    refuse_target(source, target, options.force)?;
    let name = target.file_name().ok_or_else(|| BackupError::TargetIsDirectory(target.to_owned()))?;
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(BackupError::io(format!("create {}", dir.display())))?;
    let mut temporary = Temporary {
        path: dir.join(format!(".{}.backup-{}.tmp", name.to_string_lossy(), std::process::id())),
        keep: false,
    };
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(with_suffix(&temporary.path, suffix));
    }

    let (pages, steps) = copy_pages(source, &temporary.path, options, between_steps)?;
    // One self-contained file: a rollback journal needs nothing beside it to be read.
    {
        let doing = format!("finish {}", temporary.path.display());
        let conn = Connection::open(&temporary.path).map_err(BackupError::sqlite(doing.clone()))?;
        let mode: String =
            conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0)).map_err(BackupError::sqlite(doing))?;
        debug_assert!(mode.eq_ignore_ascii_case("delete"), "{mode}");
    }
    let mut report = check(&temporary.path)?;
    report.path = target.to_owned();
    if !report.findings.is_ok() {
        return Err(BackupError::CopyUnhealthy(Box::new(report)));
    }
    std::fs::File::open(&temporary.path)
        .and_then(|f| f.sync_all())
        .map_err(BackupError::io(format!("flush {}", temporary.path.display())))?;
    // Checked again just before: a target that appeared meanwhile is not replaced unasked.
    refuse_target(source, target, options.force)?;
    std::fs::rename(&temporary.path, target).map_err(BackupError::io(format!(
        "rename {} to {}",
        temporary.path.display(),
        target.display()
    )))?;
    temporary.keep = true;
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(BackupError::io(format!("flush {}", dir.display())))?;
    Ok(BackupReport { source: source.to_owned(), target: target.to_owned(), pages, steps, check: report })
}

/// Refuses a target that is a directory, the source, beside a write-ahead log, or (without
/// `force`) already there.
fn refuse_target(source: &Path, target: &Path, force: bool) -> Result<(), BackupError> {
    if target.is_dir() {
        return Err(BackupError::TargetIsDirectory(target.to_owned()));
    }
    if target.exists() {
        let same = match (std::fs::canonicalize(source), std::fs::canonicalize(target)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            return Err(BackupError::SameFile(target.to_owned()));
        }
        if !force {
            return Err(BackupError::TargetExists(target.to_owned()));
        }
    }
    for suffix in ["-wal", "-shm"] {
        let log = with_suffix(target, suffix);
        if log.exists() {
            return Err(BackupError::LogBesideTarget(log));
        }
    }
    Ok(())
}

/// Copies every page of one snapshot of `source` into a new database at `to`; returns the
/// pages and steps.
fn copy_pages(
    source: &Path,
    to: &Path,
    options: &BackupOptions,
    between_steps: &mut dyn FnMut(u64),
) -> Result<(u64, u64), BackupError> {
    let src = open_existing(source)?;
    let reading = format!("read {}", source.display());
    // The snapshot: held until the last page is copied, so no commit elsewhere restarts us.
    src.execute_batch("BEGIN; SELECT count(*) FROM sqlite_schema;").map_err(BackupError::sqlite(reading.clone()))?;
    let writing = format!("write {}", to.display());
    let mut dst = Connection::open(to).map_err(BackupError::sqlite(writing.clone()))?;
    // The file is flushed once, when complete; until then it is only a temporary.
    dst.query_row("PRAGMA journal_mode = OFF", [], |_| Ok(()))
        .and_then(|()| dst.execute_batch("PRAGMA synchronous = OFF"))
        .map_err(BackupError::sqlite(writing.clone()))?;
    let pages_per_step = i32::try_from(options.pages_per_step.max(1)).unwrap_or(i32::MAX);
    let mut steps = 0_u64;
    let mut busy = 0_u32;
    let pages = {
        let backup =
            Backup::new(&src, &mut dst).map_err(BackupError::sqlite(format!("start the backup of {reading}")))?;
        loop {
            match backup.step(pages_per_step).map_err(BackupError::sqlite(format!("copy pages ({reading})")))? {
                StepResult::Done => {
                    steps += 1;
                    break;
                }
                StepResult::More => {
                    steps += 1;
                    busy = 0;
                    between_steps(steps);
                }
                // Only while another connection recovers the log or changes the schema.
                StepResult::Busy | StepResult::Locked => {
                    busy += 1;
                    if busy > 5_000 {
                        return Err(BackupError::Sqlite {
                            doing: format!("copy pages ({reading}): the database stayed locked"),
                            source: rusqlite::Error::SqliteFailure(
                                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                                None,
                            ),
                        });
                    }
                }
                _ => {}
            }
            std::thread::sleep(options.pause);
        }
        backup.progress().pagecount.max(0) as u64
    };
    src.execute_batch("COMMIT").map_err(BackupError::sqlite(reading))?;
    drop(src);
    dst.close().map_err(|(_, e)| BackupError::sqlite(writing)(e))?;
    Ok((pages, steps))
}

#[cfg(test)]
mod tests {
    use mnemo_store::Operations;
    use mnemo_store::Store;
    use mnemo_store::copy::TABLES;
    use rusqlite::types::Value;

    use super::*;
    use crate::check::tests::{fill, open};

    /// Every row of every table, in key order.
    fn rows(path: &Path) -> Vec<(&'static str, Vec<Vec<Value>>)> {
        let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        TABLES
            .iter()
            .map(|t| {
                let sql = format!("SELECT * FROM \"{}\" ORDER BY {}", t.name, t.key.join(", "));
                let mut stmt = c.prepare(&sql).unwrap();
                let width = stmt.column_count();
                let rows = stmt
                    .query_map([], |r| (0..width).map(|i| r.get::<_, Value>(i)).collect())
                    .unwrap()
                    .collect::<Result<Vec<Vec<Value>>, _>>()
                    .unwrap();
                (t.name, rows)
            })
            .collect()
    }

    /// A database as a server holds it (`db.sqlite` in a fresh folder, its store left open),
    /// with `memories` memories: what each backup starts from.
    async fn served(memories: usize) -> (tempfile::TempDir, PathBuf, crate::SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("db.sqlite");
        let store = open(&source);
        fill(&store, memories).await;
        (dir, source, store)
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".backup-"))
            .collect()
    }

    #[tokio::test]
    async fn a_backup_of_a_served_database_equals_it_table_by_table() {
        let (dir, source, store) = served(30).await;
        // The store stays open, as under `mnemo serve`: its log holds the newest pages.
        let target = dir.path().join("backups/copy.sqlite");
        let report = backup(&source, &target, &BackupOptions { pages_per_step: 3, ..Default::default() }).unwrap();
        let expected = rows(&source);
        assert!(expected.iter().find(|(t, _)| *t == "memory_versions").is_some_and(|(_, r)| r.len() == 72));
        assert_eq!(rows(&target), expected);
        assert!(report.check.findings.is_ok());
        assert_eq!(report.check.path, target);
        assert_eq!(report.check.findings.counts.unwrap().memories, 24);
        assert_eq!(report.pages, report.check.pages);
        assert_eq!(report.steps, report.pages.div_ceil(3));
        // One self-contained file in rollback-journal mode, nothing beside it.
        let c = Connection::open(&target).unwrap();
        let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "delete");
        drop(c);
        let names: Vec<String> = std::fs::read_dir(target.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["copy.sqlite"]);
        store.close().await;

        // A server opened on the copy finds everything.
        let restored = open(&target);
        assert_eq!(
            restored.memory_store_usage(&restored.default_workspace().await.unwrap(), &[]).await.unwrap().len(),
            0
        );
        restored.close().await;
    }

    #[tokio::test]
    async fn commits_between_steps_neither_restart_the_copy_nor_reach_it() {
        let (dir, source, store) = served(40).await;
        let before = rows(&source);
        let writer = Connection::open(&source).unwrap();
        writer.busy_timeout(Duration::from_secs(10)).unwrap();
        let mut commits = 0;
        let target = dir.path().join("copy.sqlite");
        let options = BackupOptions { pages_per_step: 2, pause: Duration::ZERO, ..Default::default() };
        // Another connection commits after every step, growing the database each time.
        let report = backup_with(&source, &target, &options, &mut |_| {
            writer
                .execute(
                    "INSERT INTO api_keys (id, secret_hash, label, created_at) VALUES (?1, randomblob(32), ?2, 0)",
                    rusqlite::params![format!("apikey_{commits}"), "x".repeat(3000)],
                )
                .unwrap();
            commits += 1;
        })
        .unwrap();
        assert!(commits > 10, "{commits} commits");
        assert_eq!(report.steps, report.pages.div_ceil(2), "the copy restarted");
        assert_eq!(rows(&target), before, "the copy is the snapshot the first step saw");
        assert_eq!(rows(&source).iter().find(|(t, _)| *t == "api_keys").unwrap().1.len(), commits);
        store.close().await;
    }

    #[tokio::test]
    async fn what_a_backup_refuses() {
        let (dir, source, store) = served(2).await;
        let options = BackupOptions::default();
        let target = dir.path().join("copy.sqlite");
        backup(&source, &target, &options).unwrap();

        let err = backup(&source, &target, &options).unwrap_err();
        assert_eq!(err.to_string(), format!("{} exists; pass --force to replace it", target.display()));
        let forced = BackupOptions { force: true, ..Default::default() };
        backup(&source, &target, &forced).unwrap();

        let alias = dir.path().join(".").join("db.sqlite");
        assert!(matches!(backup(&source, &alias, &forced), Err(BackupError::SameFile(_))));
        assert!(matches!(backup(&source, dir.path(), &forced), Err(BackupError::TargetIsDirectory(_))));
        let missing = dir.path().join("missing.sqlite");
        assert!(matches!(backup(&missing, &target, &forced), Err(BackupError::NoSource(_))));
        assert!(!missing.exists());

        // A log beside the target belongs to some other database: never mixed with the copy.
        std::fs::write(dir.path().join("copy.sqlite-wal"), b"stale").unwrap();
        let err = backup(&source, &target, &forced).unwrap_err().to_string();
        assert!(err.contains("copy.sqlite-wal exists beside the target"), "{err}");

        assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
        store.close().await;
    }
}
