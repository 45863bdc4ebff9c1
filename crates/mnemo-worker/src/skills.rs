//! The agent's skills, downloaded into the working directory (spec `worker-behaviour.md` §8.9).
//!
//! For each `session.agent.skills[]` entry (`{type, skill_id, version}`; custom and Anthropic
//! skills alike) the worker resolves the version (`latest` is an alias only that endpoint
//! understands), downloads the concrete version's archive, unpacks it in a private temporary
//! directory beside the destination, and moves the result to
//! `<workdir>/skills/<basename of the version's name, or the skill id>`, replacing whatever was
//! there. One skill failing is logged and skipped; the others still land. The directories are
//! removed again when the session's tool context ends ([`remove`]).
//!
//! Unpacking is defensive, since a skill may come from a third party:
//!
//! - every member name is screened before anything is written: an absolute path or a `..`
//!   component refuses the whole archive (the skill fails);
//! - symlinks, hard links, devices, FIFOs and sockets are skipped, in zip and tar alike;
//! - a single wrapper directory shared by every member (`pdf/SKILL.md`, `pdf/scripts/…`) is
//!   stripped, so the files land directly in the skill's directory;
//! - files are `0755` when the archive marks them executable (any execute bit), else `0644`;
//!   no setuid/setgid/sticky bit or group/other write bit survives; directories are `0700`;
//! - sizes are bounded (the reference has no bound): the download to [`MAX_ARCHIVE_BYTES`],
//!   the bytes written to [`MAX_EXTRACTED_BYTES`] in all, the members to [`MAX_MEMBERS`].
//!
//! Formats: zip (stored, deflate, bzip2 and LZMA members; Unix and macOS hosts' mode bits are
//! honoured, other hosts' entries are plain files and directories) and tar — plain, gzip, bzip2
//! or xz compressed — as the reference accepts them. Not supported: zip members compressed with
//! Deflate64, zstd, PPMd or encrypted (the reference's Python `zipfile` cannot read those
//! either), tar archives compressed with zstd, and the legacy `.lzma` (LZMA-alone) container
//! that Python's `tarfile` also reads.

use std::collections::BTreeSet;
use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::{self, Cursor, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mnemo_client::{Client, ClientError, SessionSkill};

use crate::host_path;

/// The largest archive downloaded for one skill: 256 MiB.
pub const MAX_ARCHIVE_BYTES: u64 = 256 << 20;
/// The most bytes one skill's archive may unpack to (file contents, all files together): 1 GiB.
/// A tar archive's decompressed stream is also cut off at this plus 2 KiB per member of
/// headers, so a compression bomb is never inflated further than that.
pub const MAX_EXTRACTED_BYTES: u64 = 1 << 30;
/// The most members one skill's archive may hold: 100,000.
pub const MAX_MEMBERS: usize = 100_000;

/// Mode of every directory created for a skill: owner only.
const SKILL_DIR_MODE: u32 = 0o700;

/// Why one skill could not be downloaded.
#[derive(Debug, thiserror::Error)]
enum SkillError {
    #[error("{0}")]
    Api(#[from] ClientError),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Downloads every skill of the session's agent (`session.agent.skills`) into
/// `<workdir>/skills/<name>/`; per-skill failures are logged (`tracing::warn!`) and skipped.
/// Returns the directories created (to remove at the end). `<workdir>/skills` itself is created
/// only when a skill is about to be unpacked, so an agent without skills leaves no directory
/// behind.
pub async fn download(client: &Client, skills: &[SessionSkill], workdir: &Path) -> Vec<PathBuf> {
    if skills.is_empty() {
        return Vec::new();
    }
    // Python's non-strict `Path.resolve`, as the reference does.
    let root = match host_path::canonicalize(&workdir.join("skills")) {
        Ok(root) => root,
        Err(e) => {
            tracing::warn!(workdir = %workdir.display(), error = %e, "cannot resolve the skills directory; no skills downloaded");
            return Vec::new();
        }
    };
    let mut downloaded = Vec::new();
    for skill in skills {
        let skill_id = skill.skill_id.as_deref().unwrap_or_default();
        match download_one(client, &root, skill).await {
            Ok(Some(dest)) => downloaded.push(dest),
            Ok(None) => {}
            Err(e) => tracing::warn!(skill_id, error = %e, "failed to download skill"),
        }
    }
    downloaded
}

/// Removes the directories [`download`] created (errors logged; one already gone is fine).
pub async fn remove(dirs: &[PathBuf]) {
    for dir in dirs {
        match tokio::fs::remove_dir_all(dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "failed to remove downloaded skill dir"),
        }
    }
}

/// One skill: `Ok(None)` when it was skipped with a warning already logged.
async fn download_one(client: &Client, root: &Path, skill: &SessionSkill) -> Result<Option<PathBuf>, SkillError> {
    let skill_id = skill.skill_id.as_deref().ok_or_else(|| SkillError::Invalid("the entry has no skill_id".into()))?;
    let version = skill.version.as_deref().ok_or_else(|| SkillError::Invalid("the entry has no version".into()))?;
    check_segment("skill_id", skill_id)?;
    check_segment("version", version)?;
    let found = client.get_skill_version(skill_id, version).await?;
    // `version` may be the alias `latest`: download by the concrete id the lookup returned.
    let version_id = found.id.ok_or_else(|| SkillError::Invalid("the skill version has no id".into()))?;
    check_segment("version id", &version_id)?;
    let name = found.name.unwrap_or_default();
    let dirname = dir_name(&name, skill_id);

    let root_owned = root.to_owned();
    let Some((dest, work)) = blocking(move || prepare(&root_owned, &dirname)).await?? else {
        tracing::warn!(skill_id, name, "skill name escapes the skills dir; skipping");
        return Ok(None);
    };
    let archive = client.download_skill_content(skill_id, &version_id, MAX_ARCHIVE_BYTES).await?;
    let target = dest.clone();
    blocking(move || install(&archive, work, &target, MAX_EXTRACTED_BYTES)).await??;
    tracing::info!(skill_id, version = version_id, dest = %dest.display(), "downloaded skill");
    Ok(Some(dest))
}

/// Runs blocking filesystem work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, SkillError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| SkillError::Io(io::Error::other(e)))
}

/// Refuses what the reference client's path templates refuse in a path segment: `.` or `..`
/// (alone or followed by `;…`) and a segment starting with `;`. (A literal `%2e` is no dot
/// segment: the client encodes its `%`.)
fn check_segment(what: &str, value: &str) -> Result<(), SkillError> {
    let head = value.split(';').next().unwrap_or_default();
    if matches!(head, "." | "..") || value.starts_with(';') {
        return Err(SkillError::Invalid(format!("{what} {value:?} is not a valid path segment")));
    }
    Ok(())
}

/// The skill's directory name: the last `/`-separated part of the version's name, trimmed;
/// the skill id when that is empty, `.` or `..`.
fn dir_name(name: &str, skill_id: &str) -> String {
    let base = name.trim().rsplit('/').next().unwrap_or_default();
    if matches!(base, "" | "." | "..") { skill_id.to_owned() } else { base.to_owned() }
}

/// Resolves the destination and, unless it escapes `root` (`Ok(None)`), creates `root` and a
/// private (`0700`) work directory beside the destination.
fn prepare(root: &Path, dirname: &str) -> io::Result<Option<(PathBuf, tempfile::TempDir)>> {
    let dest = host_path::canonicalize(&root.join(dirname))?;
    if !dest.starts_with(root) || dest == root {
        return Ok(None);
    }
    let parent = dest.parent().unwrap_or(root);
    dir_builder().create(parent)?;
    let work = tempfile::Builder::new().prefix(".skill-").tempdir_in(parent)?;
    Ok(Some((dest, work)))
}

/// Unpacks `archive` in `work/stage`, then moves it to `dest` (what was at `dest` goes to
/// `work/replaced`, and is put back if the final move fails). `work` is removed afterwards,
/// whatever happened.
fn install(archive: &[u8], work: tempfile::TempDir, dest: &Path, max_bytes: u64) -> io::Result<()> {
    let stage = work.path().join("stage");
    let replaced = work.path().join("replaced");
    extract(archive, &stage, max_bytes)?;
    let moved_away = match fs::rename(dest, &replaced) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    if let Err(e) = fs::rename(&stage, dest) {
        if moved_away && let Err(back) = fs::rename(&replaced, dest) {
            tracing::warn!(dest = %dest.display(), error = %back, "could not restore the previous skill dir");
        }
        return Err(e);
    }
    drop(work);
    Ok(())
}

// ---- archives ------------------------------------------------------------------------------

/// What an archive member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File {
        executable: bool,
    },
    /// A symlink, hard link, device, FIFO, socket or unknown type: never extracted (its name is
    /// still screened).
    Special,
}

/// One member as listed: its raw name and kind.
#[derive(Debug)]
struct Member {
    name: Vec<u8>,
    kind: Kind,
}

/// Unpacks a zip or tar archive into `dest` (created `0700`), writing at most `max_bytes` of
/// file contents.
fn extract(archive: &[u8], dest: &Path, max_bytes: u64) -> io::Result<()> {
    dir_builder().create(dest)?;
    let budget = Budget { written: 0, limit: max_bytes };
    match zip::ZipArchive::new(Cursor::new(archive)) {
        Ok(zip) => extract_zip(zip, dest, budget),
        // A zip the reader cannot open: say why, rather than that it is no tar.
        Err(e) if archive.starts_with(b"PK\x03\x04") || archive.starts_with(b"PK\x05\x06") => {
            Err(invalid(format!("unreadable zip archive: {e}")))
        }
        Err(_) => extract_tar(archive, dest, budget),
    }
}

fn extract_zip(mut zip: zip::ZipArchive<Cursor<&[u8]>>, dest: &Path, mut budget: Budget) -> io::Result<()> {
    if zip.len() > MAX_MEMBERS {
        return Err(invalid(format!("the archive has more than {MAX_MEMBERS} members")));
    }
    let mut members = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let entry = zip.by_index_data(i).map_err(zip_error)?;
        let mut name = entry.name().map_err(zip_error)?.into_owned().into_bytes();
        // Python's `zipfile` cuts a name at the first NUL.
        if let Some(nul) = name.iter().position(|&b| b == 0) {
            name.truncate(nul);
        }
        // The high 16 bits of the external attributes are a Unix `st_mode` only when the
        // creating host is Unix (3) or macOS (19); elsewhere the type bits mean nothing.
        let mode = entry.external_attributes() >> 16;
        let unix = matches!(entry.system(), zip::System::Unix | zip::System::OsDarwin);
        let kind = if unix && is_special(mode) {
            Kind::Special
        } else if name.ends_with(b"/") || (unix && mode & S_IFMT == S_IFDIR) {
            Kind::Dir
        } else {
            Kind::File { executable: mode & 0o111 != 0 }
        };
        members.push(Member { name, kind });
    }
    let plan = plan(&members)?;
    for (i, (rel, kind)) in plan.into_iter().enumerate().filter_map(|(i, p)| Some((i, p?))) {
        let target = dest.join(rel);
        match kind {
            Kind::Dir => dir_builder().create(&target)?,
            Kind::File { executable } => {
                let mut reader = zip.by_index(i).map_err(zip_error)?;
                write_file(&target, &mut reader, executable, &mut budget)?;
            }
            Kind::Special => {}
        }
    }
    Ok(())
}

fn extract_tar(archive: &[u8], dest: &Path, mut budget: Budget) -> io::Result<()> {
    // Pass 1: list and screen every member before writing anything.
    let mut stream = tar_stream(archive, budget.limit)?;
    let mut members = Vec::new();
    {
        let mut tar = tar::Archive::new(&mut stream);
        for entry in tar.entries()? {
            let entry = entry.map_err(|e| {
                if members.is_empty() {
                    // The very first header is bad: this is no archive at all.
                    let detail: String = e.to_string().chars().take(80).collect();
                    invalid(format!("not a zip or tar archive ({detail})"))
                } else {
                    e
                }
            })?;
            let header = entry.header();
            let Some(kind) = tar_kind(header, &entry.path_bytes())? else { continue };
            if members.len() == MAX_MEMBERS {
                return Err(invalid(format!("the archive has more than {MAX_MEMBERS} members")));
            }
            members.push(Member { name: entry.path_bytes().into_owned(), kind });
        }
    }
    if stream.read == 0 {
        return Err(invalid("empty file".into()));
    }
    let plan = plan(&members)?;
    // Pass 2: the same walk, writing what the plan keeps.
    let mut stream = tar_stream(archive, budget.limit)?;
    let mut tar = tar::Archive::new(&mut stream);
    let mut plan = plan.into_iter();
    for entry in tar.entries()? {
        let mut entry = entry?;
        if tar_kind(entry.header(), &entry.path_bytes())?.is_none() {
            continue;
        }
        let Some((rel, kind)) = plan.next().flatten() else { continue };
        let target = dest.join(rel);
        match kind {
            Kind::Dir => dir_builder().create(&target)?,
            Kind::File { executable } => write_file(&target, &mut entry, executable, &mut budget)?,
            Kind::Special => {}
        }
    }
    Ok(())
}

/// The kind of a tar member, `None` for a pax global header (not a member). Regular files
/// include the contiguous and GNU sparse types, as Python's `TarInfo.isreg`; an old-style
/// regular entry whose name ends in `/` is a directory.
fn tar_kind(header: &tar::Header, name: &[u8]) -> io::Result<Option<Kind>> {
    use tar::EntryType as T;
    Ok(Some(match header.entry_type() {
        T::XGlobalHeader => return Ok(None),
        T::Directory => Kind::Dir,
        T::Regular if header.as_bytes()[156] == 0 && name.ends_with(b"/") => Kind::Dir,
        T::Regular | T::Continuous | T::GNUSparse => Kind::File { executable: header.mode()? & 0o111 != 0 },
        _ => Kind::Special,
    }))
}

/// The decompressed tar stream (compression told by its magic bytes), cut off past `max_bytes`
/// plus 2 KiB of headers per member.
fn tar_stream(archive: &[u8], max_bytes: u64) -> io::Result<Counted<Box<dyn Read + '_>>> {
    let inner: Box<dyn Read + '_> = if archive.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(archive))
    } else if archive.starts_with(b"BZh") {
        Box::new(bzip2::read::MultiBzDecoder::new(archive))
    } else if archive.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        // A dictionary larger than 256 MiB is refused before it is allocated.
        Box::new(lzma_rust2::XzReader::new_mem_limit(archive, true, 256 << 10))
    } else if archive.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(invalid("zstd-compressed archives are not supported".into()));
    } else {
        Box::new(archive)
    };
    let limit = max_bytes.saturating_add(2048 * MAX_MEMBERS as u64);
    Ok(Counted { inner, read: 0, limit, max_bytes })
}

/// Screens every member name and decides where each kept member goes: `None` for members not
/// extracted (special files, names that are empty once normalised or once the wrapper
/// directory is stripped), else the path relative to the destination and the kind.
fn plan(members: &[Member]) -> io::Result<Vec<Option<(PathBuf, Kind)>>> {
    let safe = members.iter().map(|m| safe_parts(&m.name)).collect::<io::Result<Vec<_>>>()?;
    let kept = || members.iter().zip(&safe).filter(|(m, parts)| m.kind != Kind::Special && !parts.is_empty());
    // The wrapper directory: the one first component shared by every kept member, when at least
    // one member lies below it.
    let tops: BTreeSet<&[u8]> = kept().map(|(_, parts)| parts[0]).collect();
    let nested = kept().any(|(_, parts)| parts.len() > 1);
    let top = match (tops.len(), nested) {
        (1, true) => tops.into_iter().next(),
        _ => None,
    };
    Ok(members
        .iter()
        .zip(&safe)
        .map(|(m, parts)| {
            if m.kind == Kind::Special {
                return None;
            }
            let rest = match (top, parts.first()) {
                (Some(top), Some(&first)) if first == top => &parts[1..],
                _ => &parts[..],
            };
            if rest.is_empty() {
                return None;
            }
            let rel: PathBuf = rest.iter().map(|p| std::ffi::OsStr::from_bytes(p)).collect();
            Some((rel, m.kind))
        })
        .collect())
}

/// The components of a member name as a confined relative path (`\` read as `/`, empty and
/// `.` components dropped), or an error for an absolute name or one with a `..` component.
fn safe_parts(name: &[u8]) -> io::Result<Vec<&[u8]>> {
    let shown = || String::from_utf8_lossy(name).into_owned();
    if matches!(name.first(), Some(b'/' | b'\\')) {
        return Err(invalid(format!("refusing archive member with absolute path {:?}", shown())));
    }
    let parts: Vec<&[u8]> = name.split(|&b| b == b'/' || b == b'\\').filter(|p| !p.is_empty() && *p != b".").collect();
    if parts.contains(&&b".."[..]) {
        return Err(invalid(format!("refusing archive member with '..' component: {:?}", shown())));
    }
    Ok(parts)
}

const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;

/// Whether a Unix mode's type is a symlink, character or block device, FIFO or socket.
fn is_special(mode: u32) -> bool {
    matches!(mode & S_IFMT, 0o120_000 | 0o020_000 | 0o060_000 | 0o010_000 | 0o140_000)
}

fn dir_builder() -> DirBuilder {
    let mut b = DirBuilder::new();
    b.recursive(true).mode(SKILL_DIR_MODE);
    b
}

/// Writes one member (parent directories created `0700`), then sets its mode to `0755` or
/// `0644`.
fn write_file(target: &Path, reader: &mut impl Read, executable: bool, budget: &mut Budget) -> io::Result<()> {
    if let Some(parent) = target.parent() {
        dir_builder().create(parent)?;
    }
    let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(target)?;
    budget.copy(reader, &mut file)?;
    file.set_permissions(Permissions::from_mode(if executable { 0o755 } else { 0o644 }))
}

/// Bytes written so far for one archive, against a limit ([`MAX_EXTRACTED_BYTES`]).
#[derive(Debug)]
struct Budget {
    written: u64,
    limit: u64,
}

impl Budget {
    fn copy(&mut self, reader: &mut impl Read, out: &mut fs::File) -> io::Result<()> {
        let left = self.limit - self.written;
        let n = io::copy(&mut reader.take(left + 1), out)?;
        if n > left {
            return Err(too_large(self.limit));
        }
        self.written += n;
        Ok(())
    }
}

/// A reader that counts what it hands out and fails past `limit`.
struct Counted<R> {
    inner: R,
    read: u64,
    limit: u64,
    /// The contents bound, for the message.
    max_bytes: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(too_large(self.max_bytes));
        }
        Ok(n)
    }
}

fn too_large(limit: u64) -> io::Error {
    invalid(format!("the archive unpacks to more than {limit} bytes"))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

fn zip_error(e: zip::result::ZipError) -> io::Error {
    match e {
        zip::result::ZipError::Io(e) => e,
        e => invalid(format!("zip: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::extract::{Path as UrlPath, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use serde_json::{Value, json};
    use zip::write::SimpleFileOptions;

    use super::*;

    // ---- archive builders ------------------------------------------------------------------

    enum Z<'a> {
        File(&'a [u8], u32),
        Dir,
        Link(&'a str),
    }

    fn zip_of(entries: &[(&str, Z<'_>)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, entry) in entries {
            match entry {
                Z::File(data, mode) => {
                    w.start_file(*name, opts.unix_permissions(*mode)).unwrap();
                    w.write_all(data).unwrap();
                }
                Z::Dir => w.add_directory(*name, opts).unwrap(),
                Z::Link(target) => w.add_symlink(*name, *target, opts).unwrap(),
            }
        }
        w.finish().unwrap().into_inner()
    }

    enum T<'a> {
        File(&'a [u8], u32),
        Dir,
        Symlink(&'a [u8]),
        Hardlink(&'a [u8]),
        Fifo,
    }

    /// A tar whose names are written raw, so hostile ones can be built too.
    fn tar_of(entries: &[(&[u8], T<'_>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, entry) in entries {
            let mut h = tar::Header::new_gnu();
            let (kind, data, mode, link): (_, &[u8], _, &[u8]) = match entry {
                T::File(data, mode) => (tar::EntryType::Regular, data, *mode, b""),
                T::Dir => (tar::EntryType::Directory, b"", 0o755, b""),
                T::Symlink(to) => (tar::EntryType::Symlink, b"", 0o777, to),
                T::Hardlink(to) => (tar::EntryType::Link, b"", 0o644, to),
                T::Fifo => (tar::EntryType::Fifo, b"", 0o644, b""),
            };
            h.set_entry_type(kind);
            h.set_size(data.len() as u64);
            h.set_mode(mode);
            h.as_old_mut().name[..name.len()].copy_from_slice(name);
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn bzip(data: &[u8]) -> Vec<u8> {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut w = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap()
    }

    // ---- mock server -----------------------------------------------------------------------

    type Seen = (String, Option<String>, Option<String>);

    #[derive(Default)]
    struct Mock {
        versions: HashMap<(String, String), Value>,
        contents: HashMap<(String, String), Vec<u8>>,
        /// (path, anthropic-beta, accept) of every request.
        seen: Mutex<Vec<Seen>>,
    }

    impl Mock {
        fn skill(mut self, skill: &str, alias: &str, id: &str, name: &str, archive: Vec<u8>) -> Self {
            let version = json!({
                "type": "skill_version", "id": id, "skill_id": skill, "name": name,
                "description": "d", "created_at": "2026-01-01T00:00:00Z",
            });
            self.versions.insert((skill.into(), alias.into()), version.clone());
            self.versions.insert((skill.into(), id.into()), version);
            self.contents.insert((skill.into(), id.into()), archive);
            self
        }

        fn note(&self, path: String, headers: &HeaderMap) {
            let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
            self.seen.lock().unwrap().push((path, h("anthropic-beta"), h("accept")));
        }
    }

    fn not_found() -> Response {
        let body = json!({"type": "error", "error": {"type": "not_found_error", "message": "no such skill version"}});
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }

    async fn version(
        State(m): State<Arc<Mock>>,
        UrlPath((skill, version)): UrlPath<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        m.note(format!("/v1/skills/{skill}/versions/{version}"), &headers);
        match m.versions.get(&(skill, version)) {
            Some(v) => axum::Json(v.clone()).into_response(),
            None => not_found(),
        }
    }

    async fn content(
        State(m): State<Arc<Mock>>,
        UrlPath((skill, version)): UrlPath<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        m.note(format!("/v1/skills/{skill}/versions/{version}/content"), &headers);
        match m.contents.get(&(skill, version)) {
            Some(bytes) => bytes.clone().into_response(),
            None => not_found(),
        }
    }

    async fn serve(mock: Mock) -> (Client, Arc<Mock>) {
        let mock = Arc::new(mock);
        let app = Router::new()
            .route("/v1/skills/{skill}/versions/{version}", get(version))
            .route("/v1/skills/{skill}/versions/{version}/content", get(content))
            .with_state(mock.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (Client::new(&format!("http://{addr}"), "tok").unwrap().with_max_retries(0), mock)
    }

    fn session(skills: &[(&str, &str)]) -> Value {
        let skills: Vec<Value> =
            skills.iter().map(|(id, v)| json!({"type": "custom", "skill_id": id, "version": v})).collect();
        json!({"id": "sesn_1", "agent": {"type": "agent", "skills": skills}})
    }

    /// The skills of a session given as the JSON the API answers.
    fn skills(session: Value) -> Vec<SessionSkill> {
        serde_json::from_value::<mnemo_client::WorkerSession>(session).unwrap().agent.skills
    }

    /// Logs written while `f` runs.
    async fn logged<F: Future>(f: F) -> (F::Output, String) {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let sink = buf.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || sink.clone()).finish();
        let guard = tracing::subscriber::set_default(subscriber);
        let out = f.await;
        drop(guard);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        (out, text)
    }

    fn leftovers(root: &Path) -> Vec<String> {
        fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".skill-"))
            .collect()
    }

    // ---- download --------------------------------------------------------------------------

    #[tokio::test]
    async fn zip_and_tar_gz_land_unwrapped_with_modes() {
        let zip = zip_of(&[
            ("pdf/", Z::Dir),
            ("pdf/SKILL.md", Z::File(b"# pdf", 0o664)),
            ("pdf/scripts/run.sh", Z::File(b"#!/bin/sh\n", 0o4775)),
            ("pdf/data/", Z::Dir),
        ]);
        let tgz = gzip(&tar_of(&[
            (b"docx/", T::Dir),
            (b"docx/SKILL.md", T::File(b"# docx", 0o666)),
            (b"docx/bin/tool", T::File(b"tool", 0o744)),
        ]));
        let mock = Mock::default().skill("skill_pdf", "3", "3", "pdf", zip).skill(
            "skill_docx",
            "latest",
            "1759",
            " team/docx ",
            tgz,
        );
        let (client, mock) = serve(mock).await;
        let work = tempfile::tempdir().unwrap();
        let workdir = work.path().canonicalize().unwrap();

        let dirs = download(&client, &skills(session(&[("skill_pdf", "3"), ("skill_docx", "latest")])), &workdir).await;

        let root = workdir.join("skills");
        assert_eq!(dirs, vec![root.join("pdf"), root.join("docx")]);
        assert_eq!(read(&root.join("pdf/SKILL.md")), "# pdf");
        assert_eq!(read(&root.join("pdf/scripts/run.sh")), "#!/bin/sh\n");
        assert!(root.join("pdf/data").is_dir());
        assert!(!root.join("pdf/pdf").exists());
        assert_eq!(mode(&root.join("pdf/SKILL.md")), 0o644);
        assert_eq!(mode(&root.join("pdf/scripts/run.sh")), 0o755);
        for dir in ["", "pdf", "pdf/scripts", "pdf/data", "docx", "docx/bin"] {
            assert_eq!(mode(&root.join(dir)), 0o700, "{dir}");
        }
        assert_eq!(read(&root.join("docx/SKILL.md")), "# docx");
        assert_eq!(mode(&root.join("docx/SKILL.md")), 0o644);
        assert_eq!(mode(&root.join("docx/bin/tool")), 0o755);
        assert!(leftovers(&root).is_empty());

        let seen = mock.seen.lock().unwrap().clone();
        let paths: Vec<&str> = seen.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/v1/skills/skill_pdf/versions/3",
                "/v1/skills/skill_pdf/versions/3/content",
                "/v1/skills/skill_docx/versions/latest",
                // `latest` is resolved first; the archive is fetched by the concrete id.
                "/v1/skills/skill_docx/versions/1759/content",
            ]
        );
        assert!(seen.iter().all(|(_, beta, _)| beta.is_none()), "no default beta header: {seen:?}");
        assert_eq!(seen[1].2.as_deref(), Some("application/binary"));
    }

    #[tokio::test]
    async fn an_existing_destination_is_replaced() {
        let zip = zip_of(&[("pdf/SKILL.md", Z::File(b"new", 0o644)), ("pdf/a", Z::File(b"a", 0o644))]);
        let (client, _) = serve(Mock::default().skill("skill_pdf", "1", "1", "pdf", zip)).await;
        let work = tempfile::tempdir().unwrap();
        let root = work.path().canonicalize().unwrap().join("skills");
        fs::create_dir_all(root.join("pdf")).unwrap();
        fs::write(root.join("pdf/stale.txt"), "old").unwrap();
        fs::write(root.join("keep.txt"), "mine").unwrap();

        let dirs = download(&client, &skills(session(&[("skill_pdf", "1")])), work.path()).await;

        assert_eq!(dirs, vec![root.join("pdf")]);
        assert_eq!(read(&root.join("pdf/SKILL.md")), "new");
        assert!(!root.join("pdf/stale.txt").exists());
        assert_eq!(read(&root.join("keep.txt")), "mine");
        assert!(leftovers(&root).is_empty());
    }

    #[tokio::test]
    async fn hostile_archives_write_nothing_outside() {
        let work = tempfile::tempdir().unwrap();
        let workdir = work.path().canonicalize().unwrap();
        let outside = workdir.join("outside.txt");
        let abs = outside.to_str().unwrap().as_bytes().to_vec();
        let dotdot_zip =
            zip_of(&[("pdf/SKILL.md", Z::File(b"x", 0o644)), ("pdf/../../../outside.txt", Z::File(b"!", 0o644))]);
        let abs_tar = tar_of(&[(b"a/SKILL.md", T::File(b"x", 0o644)), (&abs, T::File(b"!", 0o644))]);
        // A `..` name is refused even on a member that would be skipped anyway.
        let dotdot_link_tar = tar_of(&[(b"b/SKILL.md", T::File(b"x", 0o644)), (b"b/../../l", T::Symlink(b"/"))]);
        let links_tar = gzip(&tar_of(&[
            (b"c/SKILL.md", T::File(b"ok", 0o644)),
            (b"c/etc", T::Symlink(b"/etc")),
            (b"c/hard", T::Hardlink(b"/etc/passwd")),
            (b"c/fifo", T::Fifo),
            // Through the (skipped) symlink: lands as a plain path inside the skill.
            (b"c/etc/evil", T::File(b"!", 0o644)),
        ]));
        let links_zip = zip_of(&[("d/SKILL.md", Z::File(b"ok", 0o644)), ("d/up", Z::Link("../../.."))]);
        let mock = Mock::default()
            .skill("s_dotdot", "1", "1", "dotdot", dotdot_zip)
            .skill("s_abs", "1", "1", "abs", abs_tar)
            .skill("s_dotdot_link", "1", "1", "dotdot_link", dotdot_link_tar)
            .skill("s_links", "1", "1", "links", links_tar)
            .skill("s_zlinks", "1", "1", "zlinks", links_zip);
        let (client, _) = serve(mock).await;
        let names = ["s_dotdot", "s_abs", "s_dotdot_link", "s_links", "s_zlinks"];
        let session = session(&names.map(|n| (n, "1")));

        let (dirs, logs) = logged(download(&client, &skills(session), &workdir)).await;

        let root = workdir.join("skills");
        assert_eq!(dirs, vec![root.join("links"), root.join("zlinks")]);
        assert!(!outside.exists());
        for refused in ["dotdot", "abs", "dotdot_link"] {
            assert!(!root.join(refused).exists(), "{refused}");
        }
        assert!(logs.contains("refusing archive member with '..' component"), "{logs}");
        assert!(logs.contains("refusing archive member with absolute path"), "{logs}");
        assert_eq!(read(&root.join("links/SKILL.md")), "ok");
        assert!(fs::symlink_metadata(root.join("links/etc")).unwrap().is_dir());
        assert_eq!(read(&root.join("links/etc/evil")), "!");
        assert!(!root.join("links/hard").exists());
        assert!(!root.join("links/fifo").exists());
        assert_eq!(read(&root.join("zlinks/SKILL.md")), "ok");
        assert!(fs::symlink_metadata(root.join("zlinks/up")).is_err());
        assert!(leftovers(&root).is_empty());
    }

    #[tokio::test]
    async fn a_failing_skill_is_logged_and_the_others_land() {
        let zip = zip_of(&[("pdf/SKILL.md", Z::File(b"x", 0o644))]);
        let (client, _) = serve(Mock::default().skill("skill_ok", "2", "2", "pdf", zip)).await;
        let work = tempfile::tempdir().unwrap();
        let workdir = work.path().canonicalize().unwrap();
        let mut session = session(&[("skill_gone", "1"), ("skill_ok", "2"), ("..", "1")]);
        session["agent"]["skills"].as_array_mut().unwrap().push(json!({"type": "custom", "version": "1"}));

        let (dirs, logs) = logged(download(&client, &skills(session), &workdir)).await;

        assert_eq!(dirs, vec![workdir.join("skills/pdf")]);
        assert_eq!(read(&workdir.join("skills/pdf/SKILL.md")), "x");
        let failures: Vec<&str> = logs.lines().filter(|l| l.contains("failed to download skill")).collect();
        assert_eq!(failures.len(), 3, "{logs}");
        assert!(failures[0].contains("skill_gone") && failures[0].contains("404"), "{logs}");
        assert!(failures[1].contains("not a valid path segment"), "{logs}");
        assert!(failures[2].contains("no skill_id"), "{logs}");
    }

    #[tokio::test]
    async fn no_skills_leave_no_directory() {
        let (client, _) = serve(Mock::default()).await;
        let work = tempfile::tempdir().unwrap();
        assert!(download(&client, &skills(json!({"agent": {"skills": []}})), work.path()).await.is_empty());
        assert!(download(&client, &skills(json!({"id": "sesn"})), work.path()).await.is_empty());
        // A skill that fails before its download leaves none either.
        assert!(download(&client, &skills(session(&[("skill_gone", "1")])), work.path()).await.is_empty());
        assert!(!work.path().join("skills").exists());
    }

    #[tokio::test]
    async fn a_name_escaping_through_a_symlink_is_skipped() {
        let zip = zip_of(&[("x/SKILL.md", Z::File(b"x", 0o644))]);
        let (client, _) = serve(Mock::default().skill("skill_x", "1", "1", "x", zip)).await;
        let work = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let root = work.path().join("skills");
        fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.join("x")).unwrap();

        let (dirs, logs) = logged(download(&client, &skills(session(&[("skill_x", "1")])), work.path())).await;

        assert!(dirs.is_empty());
        assert!(logs.contains("escapes the skills dir"), "{logs}");
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn remove_deletes_the_dirs() {
        let zip = zip_of(&[("pdf/SKILL.md", Z::File(b"x", 0o644)), ("pdf/sub/y", Z::File(b"y", 0o755))]);
        let (client, _) = serve(Mock::default().skill("skill_pdf", "1", "1", "pdf", zip)).await;
        let work = tempfile::tempdir().unwrap();
        let dirs = download(&client, &skills(session(&[("skill_pdf", "1")])), work.path()).await;
        assert_eq!(dirs.len(), 1);
        assert!(dirs[0].is_dir());

        remove(&dirs).await;
        assert!(!dirs[0].exists());
        assert!(work.path().join("skills").is_dir(), "only the skill dirs are removed");
        // Already gone: nothing to do, nothing logged as a failure.
        let ((), logs) = logged(remove(&dirs)).await;
        assert!(logs.is_empty(), "{logs}");
    }

    // ---- extraction ------------------------------------------------------------------------

    fn extracted(archive: &[u8]) -> io::Result<(tempfile::TempDir, Vec<String>)> {
        let dir = tempfile::tempdir()?;
        let dest = dir.path().join("stage");
        extract(archive, &dest, MAX_EXTRACTED_BYTES)?;
        let mut files: Vec<String> = ignore::WalkBuilder::new(&dest)
            .standard_filters(false)
            .build()
            .map(|e| e.unwrap())
            .filter(|e| e.depth() > 0)
            .map(|e| {
                let rel = e.path().strip_prefix(&dest).unwrap().to_string_lossy().into_owned();
                if e.file_type().unwrap().is_dir() { format!("{rel}/") } else { rel }
            })
            .collect();
        files.sort();
        Ok((dir, files))
    }

    #[test]
    fn every_tar_compression_is_read() {
        let tar =
            tar_of(&[(b"./s/", T::Dir), (b"./s/SKILL.md", T::File(b"x", 0o600)), (b"./s/x/y", T::File(b"y", 0o711))]);
        for archive in [tar.clone(), gzip(&tar), bzip(&tar), xz(&tar)] {
            let (_dir, files) = extracted(&archive).unwrap();
            assert_eq!(files, ["SKILL.md", "x/", "x/y"]);
        }
    }

    #[test]
    fn the_wrapper_is_stripped_only_when_shared_and_nested() {
        // Two top-level entries: kept as they are.
        let (_d, files) = extracted(&zip_of(&[("a/x", Z::File(b"", 0)), ("b", Z::File(b"", 0))])).unwrap();
        assert_eq!(files, ["a/", "a/x", "b"]);
        // One top-level file, nothing nested: kept.
        let (_d, files) = extracted(&zip_of(&[("SKILL.md", Z::File(b"", 0))])).unwrap();
        assert_eq!(files, ["SKILL.md"]);
        // Skipped members do not count towards the wrapper.
        let (_d, files) =
            extracted(&tar_of(&[(b"w/SKILL.md", T::File(b"", 0o644)), (b"other", T::Symlink(b"w"))])).unwrap();
        assert_eq!(files, ["SKILL.md"]);
        // Backslashes separate components; `.` components vanish.
        let (_d, files) = extracted(&zip_of(&[("w\\.\\a\\b.txt", Z::File(b"", 0))])).unwrap();
        assert_eq!(files, ["a/", "a/b.txt"]);
    }

    #[test]
    fn zip_type_bits_count_only_from_unix_hosts() {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let attrs = |system, mode: u32| SimpleFileOptions::default().system(system).external_attributes(mode << 16);
        // From a DOS host the type bits are no mode: a plain (executable) file.
        w.start_file("w/dos_link", attrs(zip::System::Dos, 0o120_777)).unwrap();
        w.write_all(b"target").unwrap();
        // From Unix or macOS hosts: a device is skipped, a directory is one without the `/`.
        w.start_file("w/dev", attrs(zip::System::Unix, 0o020_644)).unwrap();
        w.start_file("w/fifo", attrs(zip::System::OsDarwin, 0o010_644)).unwrap();
        w.start_file("w/sub", attrs(zip::System::Unix, 0o040_755)).unwrap();
        w.start_file("w/plain", attrs(zip::System::Unix, 0o100_640)).unwrap();
        let zip = w.finish().unwrap().into_inner();
        let (dir, files) = extracted(&zip).unwrap();
        assert_eq!(files, ["dos_link", "plain", "sub/"]);
        assert_eq!(read(&dir.path().join("stage/dos_link")), "target");
        assert_eq!(mode(&dir.path().join("stage/dos_link")), 0o755);
        assert_eq!(mode(&dir.path().join("stage/plain")), 0o644);
        assert_eq!(mode(&dir.path().join("stage/sub")), 0o700);
    }

    #[test]
    fn bombs_are_cut_off() {
        let big = vec![0u8; (1 << 20) + 1];
        let zip = zip_of(&[("w/a", Z::File(&big[..600 << 10], 0o644)), ("w/b", Z::File(&big[..600 << 10], 0o644))]);
        let tgz = gzip(&tar_of(&[(b"w/a", T::File(&big, 0o644))]));
        for archive in [zip, tgz] {
            let dir = tempfile::tempdir().unwrap();
            let err = extract(&archive, &dir.path().join("stage"), 1 << 20).unwrap_err();
            assert!(err.to_string().contains("unpacks to more than 1048576 bytes"), "{err}");
            let small = extract(&archive, &dir.path().join("stage2"), 2 << 20);
            assert!(small.is_ok(), "{small:?}");
        }
    }

    #[test]
    fn junk_and_empty_archives_fail() {
        assert!(extracted(b"").unwrap_err().to_string().contains("empty file"));
        let junk = extracted(&b"this is not an archive; ".repeat(30)).unwrap_err().to_string();
        assert!(junk.starts_with("not a zip or tar archive ("), "{junk}");
        assert!(extracted(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0]).unwrap_err().to_string().contains("zstd"));
        // An empty (but well-formed) tar is an empty skill.
        let (_d, files) = extracted(&tar_of(&[])).unwrap();
        assert!(files.is_empty());
    }

    #[test]
    fn dir_names_follow_the_reference() {
        assert_eq!(dir_name("pdf", "skill_1"), "pdf");
        assert_eq!(dir_name("  a/b/pdf \n", "skill_1"), "pdf");
        assert_eq!(dir_name("pdf/", "skill_1"), "skill_1");
        assert_eq!(dir_name("..", "skill_1"), "skill_1");
        assert_eq!(dir_name("", "skill_1"), "skill_1");
        assert!(check_segment("v", "latest").is_ok());
        assert!(check_segment("v", "%2e%2e").is_ok());
        assert!(check_segment("v", "..;x").is_err());
        assert!(check_segment("v", ";x").is_err());
    }
}
