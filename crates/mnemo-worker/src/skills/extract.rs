//! Unpacking one skill archive, defensively: every member name screened before anything is
//! written, special files skipped, a shared wrapper directory stripped, modes normalised and
//! sizes bounded (see [`super`]).

use std::collections::BTreeSet;
use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::{self, Cursor, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::MAX_MEMBERS;

/// Mode of every directory created for a skill: owner only.
const SKILL_DIR_MODE: u32 = 0o700;

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
pub(super) fn extract(archive: &[u8], dest: &Path, max_bytes: u64) -> io::Result<()> {
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
    // Pass 0: the raw headers, so a long-name or PAX extension is refused by its declared size
    // before the tar reader would read it into memory whole.
    screen_extensions(archive, budget.limit)?;
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

/// Refuses a tar whose GNU long-name / long-link or PAX extension records declare more than
/// [`MAX_EXTENSION_BYTES`]: the tar reader keeps each in memory whole, so without this a small
/// compressed archive could make it allocate up to the whole decompression bound. Junk that is
/// no tar is left for the next pass to name.
fn screen_extensions(archive: &[u8], max_bytes: u64) -> io::Result<()> {
    let mut stream = tar_stream(archive, max_bytes)?;
    let mut tar = tar::Archive::new(&mut stream);
    let Ok(entries) = tar.entries() else { return Ok(()) };
    for entry in entries.raw(true) {
        let Ok(entry) = entry else { return Ok(()) };
        let kind = entry.header().entry_type();
        let extension = kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions();
        if extension && entry.header().entry_size()? > MAX_EXTENSION_BYTES {
            return Err(invalid(format!(
                "the archive has a long-name or PAX header larger than {MAX_EXTENSION_BYTES} bytes"
            )));
        }
    }
    Ok(())
}

/// The largest GNU long-name / PAX extension record read: far beyond any real name.
const MAX_EXTENSION_BYTES: u64 = 64 << 10;

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

/// Creates directories (and missing parents) with mode `0700`.
pub(super) fn dir_builder() -> DirBuilder {
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

/// Bytes written so far for one archive, against a limit ([`MAX_EXTRACTED_BYTES`](super::MAX_EXTRACTED_BYTES)).
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
    use std::io::Write;

    use zip::write::SimpleFileOptions;

    use super::*;
    use crate::skills::MAX_EXTRACTED_BYTES;
    use crate::skills::archives::{T, Z, bzip, gzip, mode, read, tar_of, xz, zip_of};

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

    /// A tar with a GNU long-name record of `size` bytes (zeros), then a small file.
    fn long_name_tar(size: usize) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        h.set_size(size as u64);
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_cksum();
        let mut name = vec![b'n'; size];
        if let Some(last) = name.last_mut() {
            *last = 0;
        }
        b.append(&h, &name[..]).unwrap();
        let mut f = tar::Header::new_gnu();
        f.set_entry_type(tar::EntryType::Regular);
        f.set_size(1);
        f.set_mode(0o644);
        f.as_old_mut().name[..1].copy_from_slice(b"x");
        f.set_cksum();
        b.append(&f, &b"!"[..]).unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn a_huge_long_name_header_is_refused_before_it_is_read() {
        // 64 MiB of long name compresses to a few KiB: refused by its declared size.
        let bomb = gzip(&long_name_tar(64 << 20));
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        let err = extracted(&bomb).unwrap_err().to_string();
        assert!(err.contains("long-name or PAX header larger than"), "{err}");
        // A long but sane name (250 bytes, past the 100 of a plain header) still works.
        let (_d, files) = extracted(&long_name_tar(251)).unwrap();
        assert_eq!(files, ["n".repeat(250)]);
    }

    #[test]
    fn many_members_deep_nesting_and_odd_names_are_bounded() {
        // One member past the bound.
        let names: Vec<String> = (0..=MAX_MEMBERS).map(|i| format!("m{i}")).collect();
        let entries: Vec<(&[u8], T<'_>)> = names.iter().map(|n| (n.as_bytes(), T::Dir)).collect();
        let err = extracted(&gzip(&tar_of(&entries))).unwrap_err().to_string();
        assert!(err.contains("more than 100000 members"), "{err}");
        // Duplicates: the last one wins; non-UTF-8 names land as bytes; nothing escapes.
        let tar = tar_of(&[
            (b"w/a", T::File(b"1", 0o644)),
            (b"w/a", T::File(b"2", 0o644)),
            (b"w/\xff\xfe", T::File(b"x", 0o644)),
            (b"w/l", T::Symlink(b"/")),
            (b"w/l/x", T::File(b"in", 0o644)),
        ]);
        let (dir, files) = extracted(&tar).unwrap();
        assert_eq!(read(&dir.path().join("stage/a")), "2");
        assert_eq!(files.len(), 4, "{files:?}");
        // Nesting deeper than the OS allows fails cleanly.
        let deep = "d/".repeat(3_000) + "f";
        let zip = zip_of(&[(deep.as_str(), Z::File(b"x", 0o644))]);
        assert!(extracted(&zip).is_err());
    }

    // ---- generated archives ----------------------------------------------------------------

    use proptest::prelude::*;

    fn config(default: u32) -> ProptestConfig {
        let env = |name| std::env::var(name).ok().and_then(|n: String| n.parse().ok());
        let cases = env("MNEMO_FUZZ_CASES").or_else(|| env("PROPTEST_CASES")).unwrap_or(default);
        ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
    }

    fn member_name() -> impl Strategy<Value = Vec<u8>> {
        let part = prop_oneof![
            4 => "[a-z]{1,3}".prop_map(String::into_bytes),
            1 => Just(b"..".to_vec()),
            1 => Just(b".".to_vec()),
            1 => Just(b"".to_vec()),
            1 => Just(b"\\".to_vec()),
            1 => Just(vec![0xff]),
        ];
        (any::<bool>(), prop::collection::vec(part, 1..5)).prop_map(|(abs, parts)| {
            let mut name = if abs { b"/".to_vec() } else { Vec::new() };
            name.extend(parts.join(&b'/'));
            name.truncate(99);
            name
        })
    }

    fn kind() -> impl Strategy<Value = u8> {
        0u8..5
    }

    proptest! {
        #![proptest_config(config(200))]

        /// Whatever the members, extraction never panics, never writes outside the
        /// destination, never leaves a symlink, and refuses every absolute or `..` name.
        #[test]
        fn generated_archives_stay_inside(members in prop::collection::vec((member_name(), kind()), 0..8), as_zip in any::<bool>()) {
            let outer = tempfile::tempdir().unwrap();
            let dest = outer.path().join("stage");
            let archive = if as_zip {
                let names: Vec<(String, Z<'_>)> = members.iter().map(|(n, k)| {
                    let n = String::from_utf8_lossy(n).into_owned();
                    (n, match k { 0 | 1 => Z::File(b"z", 0o644), 2 => Z::Dir, _ => Z::Link("/etc") })
                }).collect();
                let refs: Vec<(&str, Z<'_>)> = names.into_iter().map(|(n, z)| (Box::leak(n.into_boxed_str()) as &str, z)).collect();
                std::panic::catch_unwind(|| zip_of(&refs)).ok()
            } else {
                let entries: Vec<(&[u8], T<'_>)> = members.iter().map(|(n, k)| (&n[..], match k {
                    0 | 1 => T::File(b"t", 0o644), 2 => T::Dir, 3 => T::Symlink(b"/etc"), _ => T::Hardlink(b"/etc/passwd"),
                })).collect();
                Some(tar_of(&entries))
            };
            let Some(archive) = archive else { return Ok(()) };
            let hostile = members.iter().any(|(n, _)| {
                n.first() == Some(&b'/') || n.split(|&b| b == b'/' || b == b'\\').any(|p| p == b"..")
            });
            let result = extract(&archive, &dest, 1 << 20);
            if hostile && !as_zip {
                prop_assert!(result.is_err(), "a hostile name is refused");
            }
            // Nothing outside the destination, no link inside it.
            let around: Vec<_> = std::fs::read_dir(outer.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            prop_assert!(around.iter().all(|n| n == "stage"), "{:?}", around);
            if dest.exists() {
                for e in ignore::WalkBuilder::new(&dest).standard_filters(false).build() {
                    let e = e.unwrap();
                    prop_assert!(!e.path_is_symlink(), "{:?}", e.path());
                }
            }
        }
    }
}
