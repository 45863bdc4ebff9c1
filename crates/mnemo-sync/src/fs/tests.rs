//! Behaviour of [`FileStore`] against a real temp folder, including an agent that plants
//! symlinks, FIFOs and sockets or swaps folders around.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use rustix::fs::{CWD, Mode};
use tempfile::TempDir;

use super::*;

/// A digest no file here hashes to: planted in the cache to tell a cached answer from a re-read.
const CACHED: Digest = Digest::from_bytes([0xca; 32]);

/// A temp dir holding a `store` root (created) and an `outside` folder with a `secret.txt` that
/// nothing may read or change through the store.
struct Fixture {
    _tmp: TempDir,
    root: PathBuf,
    outside: PathBuf,
    store: FileStore,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("store");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        let store = FileStore::new(&root);
        Self { _tmp: tmp, root, outside, store }
    }

    fn secret(&self) -> PathBuf {
        self.outside.join("secret.txt")
    }

    fn assert_outside_untouched(&self) {
        assert_eq!(std::fs::read_to_string(self.secret()).unwrap(), "secret");
        assert_eq!(names(&self.outside), ["secret.txt"]);
    }
}

fn rel(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

fn sha(bytes: &[u8]) -> Digest {
    Digest::of(bytes)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

fn scanned(store: &FileStore) -> Vec<String> {
    store.scan().unwrap().into_keys().map(|p| p.as_str().to_owned()).collect()
}

fn set_mtime(path: &Path, at: SystemTime) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(at).unwrap();
}

/// Runs `f` on another thread and fails the test if it has not returned within a few seconds,
/// so a blocking open shows up as a failure rather than a hung test run.
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(10)).expect("the operation blocked")
}

#[test]
fn file_store_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FileStore>();
}

#[test]
fn marker_text_is_exact() {
    assert_eq!(marker_text("memstore_1"), "version 1\nmemstore_1");
}

#[test]
fn write_creates_private_parents_and_files() {
    let f = Fixture::new();
    let root_mode = mode(&f.root);
    f.store.write(&rel("a/b/c.md"), b"hello").unwrap();
    assert_eq!(mode(&f.root.join("a")), 0o700);
    assert_eq!(mode(&f.root.join("a/b")), 0o700);
    assert_eq!(mode(&f.root.join("a/b/c.md")), 0o600);
    assert_eq!(mode(&f.root), root_mode, "the root is left as it was");
    assert_eq!(f.store.read(&rel("a/b/c.md")).unwrap(), b"hello");
    assert_eq!(names(&f.root.join("a/b")), ["c.md"], "no temp file is left");

    // Overwriting replaces the file, so a looser mode set by the agent does not survive.
    std::fs::set_permissions(f.root.join("a/b/c.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
    f.store.write(&rel("a/b/c.md"), b"again").unwrap();
    assert_eq!(mode(&f.root.join("a/b/c.md")), 0o600);
    assert_eq!(f.store.read(&rel("a/b/c.md")).unwrap(), b"again");
    assert_eq!(names(&f.root.join("a/b")), ["c.md"]);
}

#[test]
fn failed_writes_leave_the_old_content_and_no_temp_file() {
    let f = Fixture::new();
    f.store.write(&rel("x.md"), b"old").unwrap();

    // The re-check fails after the temp file is written: it must be removed again.
    let wrote = f.store.write_if_unchanged(&rel("x.md"), Some(sha(b"other")), b"new").unwrap();
    assert!(!wrote);
    // Refused content never reaches the disk.
    let err = f.store.write(&rel("x.md"), b"\xff\xfe").unwrap_err();
    assert!(matches!(err, FsError::NotUtf8(_)), "{err}");
    assert_eq!(std::fs::read(f.root.join("x.md")).unwrap(), b"old");

    // The rename fails because a folder is in the way.
    std::fs::create_dir(f.root.join("d")).unwrap();
    std::fs::write(f.root.join("d/keep.md"), "keep").unwrap();
    let err = f.store.write(&rel("d"), b"file").unwrap_err();
    assert!(err.is_refusal(), "{err}");
    assert_eq!(std::fs::read(f.root.join("d/keep.md")).unwrap(), b"keep");
    assert_eq!(names(&f.root), ["d", "x.md"], "no temp file is left");
}

#[test]
fn write_never_creates_the_root() {
    let f = Fixture::new();
    std::fs::remove_dir(&f.root).unwrap();
    let err = f.store.write(&rel("a/b.md"), b"x").unwrap_err();
    assert!(matches!(err, FsError::RootMissing(_)), "{err}");
    let err = f.store.write_if_unchanged(&rel("b.md"), None, b"x").unwrap_err();
    assert!(matches!(err, FsError::RootMissing(_)), "{err}");
    assert!(!f.root.exists());
    assert!(!f.store.root_exists());
    assert!(matches!(f.store.scan(), Err(FsError::RootMissing(_))));
    assert!(matches!(f.store.hash_now(&rel("b.md")), Err(FsError::RootMissing(_))));
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Missing);
    assert!(err.to_string().contains("is missing or is not a real directory"));
}

#[test]
fn a_root_that_is_a_symlink_is_missing() {
    let f = Fixture::new();
    std::fs::remove_dir(&f.root).unwrap();
    symlink(&f.outside, &f.root).unwrap();
    assert!(!f.store.root_exists());
    assert!(matches!(f.store.scan(), Err(FsError::RootMissing(_))));
    assert!(matches!(f.store.read(&rel("secret.txt")), Err(FsError::RootMissing(_))));
    assert!(matches!(f.store.write(&rel("new.md"), b"x"), Err(FsError::RootMissing(_))));
    assert!(matches!(f.store.write_marker("memstore_1"), Err(FsError::RootMissing(_))));
    assert!(matches!(f.store.create_root(), Err(FsError::RootMissing(_))));
    f.assert_outside_untouched();
}

#[test]
fn create_root_makes_private_ancestors_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mnt/memory/store");
    let store = FileStore::new(&root);
    assert!(!store.root_exists());
    store.create_root().unwrap();
    assert!(store.root_exists());
    for dir in ["mnt", "mnt/memory", "mnt/memory/store"] {
        assert_eq!(mode(&tmp.path().join(dir)), 0o700, "{dir}");
    }
    std::fs::write(root.join("a.md"), "a").unwrap();
    store.create_root().unwrap();
    assert_eq!(names(&root), ["a.md"]);
}

#[test]
fn new_files_are_created_in_place_private_and_never_over_anything() {
    let f = Fixture::new();
    let root_mode = mode(&f.root);
    let mut new = f.store.new_files().unwrap();
    // The same folder twice (its fd reused), a deeper one, back to the first, then the root.
    for (path, body) in
        [("a/b/1.md", "one"), ("a/b/2.md", "two"), ("a/c/3.md", "three"), ("a/b/4.md", "four"), ("top.md", "top")]
    {
        new.create(&rel(path), body.as_bytes()).unwrap();
    }
    for (path, body) in
        [("a/b/1.md", "one"), ("a/b/2.md", "two"), ("a/c/3.md", "three"), ("a/b/4.md", "four"), ("top.md", "top")]
    {
        assert_eq!(f.store.read(&rel(path)).unwrap(), body.as_bytes(), "{path}");
        assert_eq!(mode(&f.root.join(path)), 0o600, "{path}");
    }
    assert_eq!(mode(&f.root.join("a")), 0o700);
    assert_eq!(mode(&f.root.join("a/c")), 0o700);
    assert_eq!(mode(&f.root), root_mode, "the root is left as it was");
    assert_eq!(names(&f.root.join("a/b")), ["1.md", "2.md", "4.md"], "no temp file is made");

    // Whatever is already at a path is an error and stays as it was: a file, a symlink, a folder.
    let err = new.create(&rel("a/b/1.md"), b"again").unwrap_err();
    assert!(err.to_string().contains("`a/b/1.md`"), "{err}");
    assert_eq!(std::fs::read(f.root.join("a/b/1.md")).unwrap(), b"one");
    symlink(f.secret(), f.root.join("a/b/link.md")).unwrap();
    new.create(&rel("a/b/link.md"), b"pwned").unwrap_err();
    assert!(std::fs::symlink_metadata(f.root.join("a/b/link.md")).unwrap().is_symlink());
    new.create(&rel("a/c"), b"file").unwrap_err();
    assert_eq!(names(&f.root.join("a/c")), ["3.md"]);

    // The marker's path is reserved, and refused content never reaches the disk.
    let err = new.create(&rel(MARKER_NAME), b"x").unwrap_err();
    assert!(err.is_refusal(), "{err}");
    let strict = FileStore::new(&f.root);
    let err = strict.new_files().unwrap().create(&rel("bin.md"), b"\xff").unwrap_err();
    assert!(matches!(err, FsError::NotUtf8(_)), "{err}");
    assert!(!f.root.join("bin.md").exists());

    // A folder swapped for a symlink is never entered, nor one that is a file.
    symlink(&f.outside, f.root.join("sub")).unwrap();
    let err = new.create(&rel("sub/new.md"), b"pwned").unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
    std::fs::write(f.root.join("plain"), "plain").unwrap();
    let err = new.create(&rel("plain/x.md"), b"x").unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
    f.assert_outside_untouched();
}

#[test]
fn new_files_refuse_a_missing_root() {
    let f = Fixture::new();
    std::fs::remove_dir(&f.root).unwrap();
    assert!(matches!(f.store.new_files().unwrap_err(), FsError::RootMissing(_)));
}

#[test]
fn symlinked_files_are_skipped_refused_and_never_written_through() {
    let f = Fixture::new();
    symlink(f.secret(), f.root.join("link.md")).unwrap();
    symlink(f.secret(), f.root.join("link2.md")).unwrap();
    std::fs::write(f.root.join("real.md"), "real").unwrap();

    assert_eq!(scanned(&f.store), ["real.md"]);
    let err = f.store.read(&rel("link.md")).unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
    assert!(err.is_refusal());
    assert!(err.to_string().contains("`link.md`"), "{err}");
    assert!(matches!(f.store.hash_now(&rel("link.md")), Err(FsError::NotRegular(_))));

    // A plain write replaces the symlink itself; the target is untouched.
    f.store.write(&rel("link.md"), b"mine").unwrap();
    assert!(std::fs::symlink_metadata(f.root.join("link.md")).unwrap().is_file());
    assert_eq!(f.store.read(&rel("link.md")).unwrap(), b"mine");

    // The checked operations refuse to act on a symlink at all.
    let err = f.store.write_if_unchanged(&rel("link2.md"), None, b"x").unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
    let err = f.store.remove_if_unchanged(&rel("link2.md"), sha(b"secret")).unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
    assert!(std::fs::symlink_metadata(f.root.join("link2.md")).unwrap().is_symlink());
    f.assert_outside_untouched();
}

#[test]
fn a_folder_swapped_for_a_symlink_is_never_entered() {
    let f = Fixture::new();
    f.store.write(&rel("sub/a.md"), b"inside").unwrap();
    std::fs::remove_dir_all(f.root.join("sub")).unwrap();
    symlink(&f.outside, f.root.join("sub")).unwrap();

    assert!(scanned(&f.store).is_empty());
    for op in [
        f.store.read(&rel("sub/secret.txt")).map(|_| ()),
        f.store.hash_now(&rel("sub/secret.txt")).map(|_| ()),
        f.store.write(&rel("sub/secret.txt"), b"pwned"),
        f.store.write(&rel("sub/new.md"), b"pwned"),
        f.store.write(&rel("sub/deeper/new.md"), b"pwned"),
        f.store.write_if_unchanged(&rel("sub/new.md"), None, b"pwned").map(|_| ()),
        f.store.remove_if_unchanged(&rel("sub/secret.txt"), sha(b"secret")).map(|_| ()),
    ] {
        let err = op.unwrap_err();
        assert!(matches!(err, FsError::NotRegular(_)), "{err}");
        assert!(err.to_string().contains("`sub`"), "{err}");
    }
    f.store.prune_empty_dirs();
    f.assert_outside_untouched();

    // A file where a folder should be is refused the same way, not overwritten.
    std::fs::write(f.root.join("plain"), "plain").unwrap();
    let err = f.store.write(&rel("plain/x.md"), b"x").unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
    assert_eq!(std::fs::read(f.root.join("plain")).unwrap(), b"plain");
}

#[test]
fn fifos_and_sockets_are_skipped_and_refused_without_blocking() {
    let f = Fixture::new();
    rustix::fs::mkfifoat(CWD, f.root.join("pipe.md"), Mode::RUSR | Mode::WUSR).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(f.root.join("sock.md")).unwrap();
    std::fs::write(f.root.join("a.md"), "a").unwrap();

    let root = f.root;
    let (listing, read, hash, marker) = within_seconds(move || {
        let store = FileStore::new(&root);
        let listing = scanned(&store);
        let read = store.read(&rel("pipe.md")).map(|_| ());
        let hash = store.hash_now(&rel("sock.md")).map(|_| ());
        std::fs::rename(root.join("pipe.md"), root.join(MARKER_NAME)).unwrap();
        (listing, read, hash, store.check_marker("memstore_1"))
    });
    assert_eq!(listing, ["a.md"]);
    assert!(matches!(read, Err(FsError::NotRegular(_))), "{read:?}");
    assert!(matches!(hash, Err(FsError::NotRegular(_))), "{hash:?}");
    assert_eq!(marker, MarkerState::Mismatch);
}

#[test]
fn utf8_mode_refuses_binary_content_both_ways() {
    let f = Fixture::new();
    let err = f.store.write(&rel("bin.dat"), b"\xff\x00\xfe").unwrap_err();
    assert!(matches!(err, FsError::NotUtf8(_)), "{err}");
    assert!(err.is_refusal());
    assert!(!f.root.join("bin.dat").exists());

    std::fs::write(f.root.join("bin.dat"), b"\xff\x00\xfe").unwrap();
    let err = f.store.read(&rel("bin.dat")).unwrap_err();
    assert!(matches!(err, FsError::NotUtf8(_)), "{err}");
    assert_eq!(err.to_string(), "`bin.dat` is not valid utf-8 text; only text files can be synced");
    // A scan still lists and hashes it, so the engine can see it and refuse it by hash.
    let listing = f.store.scan().unwrap();
    assert_eq!(listing[&rel("bin.dat")].sha256, sha(b"\xff\x00\xfe"));

    let lax = FileStore::new(&f.root).with_utf8_only(false);
    assert_eq!(lax.read(&rel("bin.dat")).unwrap(), b"\xff\x00\xfe");
    lax.write(&rel("other.dat"), b"\xff").unwrap();
    assert_eq!(std::fs::read(f.root.join("other.dat")).unwrap(), b"\xff");
}

#[test]
fn marker_write_and_check() {
    let f = Fixture::new();
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Missing);
    f.store.write_marker("memstore_1").unwrap();
    let marker = f.root.join(MARKER_NAME);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "version 1\nmemstore_1");
    assert_eq!(mode(&marker), 0o600);
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Matches);
    assert_eq!(f.store.check_marker("memstore_2"), MarkerState::Mismatch);

    // A symlink to a file with exactly the right text still does not vouch for the folder.
    std::fs::write(f.outside.join("fake"), marker_text("memstore_1")).unwrap();
    std::fs::remove_file(&marker).unwrap();
    symlink(f.outside.join("fake"), &marker).unwrap();
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Mismatch);

    std::fs::remove_file(&marker).unwrap();
    std::fs::create_dir(&marker).unwrap();
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Mismatch);

    std::fs::remove_dir(&marker).unwrap();
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Missing);
    f.store.write_marker("memstore_1").unwrap();
    assert_eq!(names(&f.root), [MARKER_NAME], "no temp file is left");
}

#[test]
fn scan_hides_the_root_marker_and_temp_files_only() {
    let f = Fixture::new();
    f.store.write_marker("memstore_1").unwrap();
    f.store.write(&rel("a.md"), b"aa").unwrap();
    f.store.write(&rel("sub/.anthropic-memory-store"), b"nested").unwrap();
    std::fs::write(f.root.join(".fs-0123456789abcdef.tmp"), "half").unwrap();
    std::fs::write(f.root.join(".fs-not-a-temp.tmp"), "real").unwrap();

    let listing = f.store.scan().unwrap();
    let keys: Vec<&str> = listing.keys().map(RelPath::as_str).collect();
    assert_eq!(keys, [".fs-not-a-temp.tmp", "a.md", "sub/.anthropic-memory-store"]);
    assert_eq!(listing[&rel("a.md")], LocalFile { sha256: sha(b"aa"), size: 2 });

    // The marker cannot be written or removed through the file API.
    for path in [MARKER_NAME, ".anthropic-memory-store/x"] {
        let err = f.store.write(&rel(path), b"x").unwrap_err();
        assert!(matches!(err, FsError::InvalidPath { .. }), "{err}");
    }
    let err = f.store.remove_if_unchanged(&rel(MARKER_NAME), sha(marker_text("memstore_1").as_bytes())).unwrap_err();
    assert!(err.to_string().contains("reserved marker"), "{err}");
    assert_eq!(f.store.check_marker("memstore_1"), MarkerState::Matches);
}

#[test]
fn settled_files_are_served_from_the_stat_cache() {
    let f = Fixture::new();
    let path = f.root.join("old.md");
    std::fs::write(&path, "aaaa").unwrap();
    let old = SystemTime::now() - Duration::from_secs(60);
    set_mtime(&path, old);
    // The ctime cannot be set back, so wait for it to settle too.
    std::thread::sleep(Duration::from_millis(2100));

    let first = f.store.scan().unwrap();
    assert_eq!(first[&rel("old.md")].sha256, sha(b"aaaa"));
    assert_eq!(f.store.cache_hits(), 0);
    assert_eq!(f.store.scan().unwrap(), first);
    assert_eq!(f.store.cache_hits(), 1);

    // Proof that the hash comes from the cache and not from re-reading the file.
    assert!(f.store.poison_cache(&rel("old.md"), CACHED));
    assert_eq!(f.store.scan().unwrap()[&rel("old.md")].sha256, CACHED);
    assert_eq!(f.store.cache_hits(), 2);

    // Rewritten in place with the same size and the old mtime put back: the ctime moved, so the
    // stale hash is not trusted.
    std::fs::write(&path, "bbbb").unwrap();
    set_mtime(&path, old);
    assert_eq!(f.store.scan().unwrap()[&rel("old.md")].sha256, sha(b"bbbb"));
    assert_eq!(f.store.cache_hits(), 2);
    // `hash_now` never trusts the cache.
    assert!(!f.store.poison_cache(&rel("old.md"), CACHED));
    assert_eq!(f.store.hash_now(&rel("old.md")).unwrap(), Some(sha(b"bbbb")));
}

#[test]
fn recently_modified_files_are_rehashed_every_scan() {
    let f = Fixture::new();
    f.store.write(&rel("fresh.md"), b"one").unwrap();
    for _ in 0..3 {
        assert_eq!(f.store.scan().unwrap()[&rel("fresh.md")].sha256, sha(b"one"));
    }
    assert_eq!(f.store.cache_hits(), 0);
    assert!(!f.store.poison_cache(&rel("fresh.md"), CACHED), "a file inside the 2 s window is not even cached");
    // A future mtime (a skewed clock, or an agent's `touch`) never counts as settled either.
    set_mtime(&f.root.join("fresh.md"), SystemTime::now() + Duration::from_secs(3600));
    f.store.scan().unwrap();
    f.store.scan().unwrap();
    assert_eq!(f.store.cache_hits(), 0);
}

#[test]
fn checked_write_refuses_when_the_file_changed() {
    let f = Fixture::new();
    let p = rel("n/a.md");
    assert!(!f.store.write_if_unchanged(&p, Some(sha(b"v1")), b"v2").unwrap());
    assert!(!f.root.join("n").exists(), "no folder for a file that is not there");

    assert!(f.store.write_if_unchanged(&p, None, b"v1").unwrap());
    assert!(!f.store.write_if_unchanged(&p, None, b"other").unwrap());
    assert!(f.store.write_if_unchanged(&p, Some(sha(b"v1")), b"v2").unwrap());
    assert!(!f.store.write_if_unchanged(&p, Some(sha(b"v1")), b"v3").unwrap());
    assert_eq!(f.store.read(&p).unwrap(), b"v2");
    assert_eq!(names(&f.root.join("n")), ["a.md"]);
}

#[test]
fn checked_remove_refuses_when_the_file_changed() {
    let f = Fixture::new();
    let p = rel("n/a.md");
    assert!(f.store.remove_if_unchanged(&p, sha(b"v1")).unwrap(), "already gone");
    f.store.write(&p, b"v2").unwrap();
    assert!(!f.store.remove_if_unchanged(&p, sha(b"v1")).unwrap());
    assert_eq!(f.store.read(&p).unwrap(), b"v2");
    assert!(f.store.remove_if_unchanged(&p, sha(b"v2")).unwrap());
    assert!(!f.root.join("n/a.md").exists());
    assert_eq!(f.store.hash_now(&p).unwrap(), None);
    assert!(f.store.remove_if_unchanged(&p, sha(b"v2")).unwrap());
}

#[test]
fn missing_files_are_not_found_not_refused() {
    let f = Fixture::new();
    for p in ["nope.md", "no/such/folder.md"] {
        assert_eq!(f.store.hash_now(&rel(p)).unwrap(), None);
        let err = f.store.read(&rel(p)).unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert!(!err.is_refusal(), "{err}");
        assert!(err.to_string().contains(&format!("`{p}`")), "{err}");
    }
    let dir = f.store.read(&rel("nope.md")).unwrap_err();
    assert!(dir.to_string().starts_with("cannot open `nope.md`: "), "{dir}");
    std::fs::create_dir(f.root.join("dir.md")).unwrap();
    let err = f.store.read(&rel("dir.md")).unwrap_err();
    assert!(matches!(err, FsError::NotRegular(_)), "{err}");
}

#[test]
fn remove_root_does_not_follow_symlinks() {
    let f = Fixture::new();
    f.store.write(&rel("a/b/c.md"), b"c").unwrap();
    f.store.write_marker("memstore_1").unwrap();
    std::fs::create_dir(f.root.join("empty")).unwrap();
    symlink(&f.outside, f.root.join("a/dirlink")).unwrap();
    symlink(f.secret(), f.root.join("a/b/filelink")).unwrap();
    rustix::fs::mkfifoat(CWD, f.root.join("a/pipe"), Mode::RUSR).unwrap();

    f.store.remove_root().unwrap();
    assert!(std::fs::symlink_metadata(&f.root).is_err());
    f.assert_outside_untouched();
    f.store.remove_root().unwrap();

    // A root path that became a symlink is unlinked itself, never emptied through.
    symlink(&f.outside, &f.root).unwrap();
    f.store.remove_root().unwrap();
    assert!(std::fs::symlink_metadata(&f.root).is_err());
    f.assert_outside_untouched();
}

#[test]
fn prune_removes_empty_folders_but_never_the_root() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root.join("a/b/c")).unwrap();
    std::fs::create_dir(f.root.join("e")).unwrap();
    f.store.write(&rel("keep/d.md"), b"d").unwrap();
    let empty_outside = f.outside.join("empty");
    std::fs::create_dir(&empty_outside).unwrap();
    symlink(&empty_outside, f.root.join("link")).unwrap();

    f.store.prune_empty_dirs();
    assert_eq!(names(&f.root), ["keep", "link"]);
    assert!(empty_outside.is_dir());

    assert!(f.store.remove_if_unchanged(&rel("keep/d.md"), sha(b"d")).unwrap());
    std::fs::remove_file(f.root.join("link")).unwrap();
    f.store.prune_empty_dirs();
    assert!(f.root.is_dir());
    assert!(names(&f.root).is_empty());
}
