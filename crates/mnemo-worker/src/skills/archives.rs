//! Archive builders for the skills tests: zip and tar (raw names, so hostile ones too) and the
//! compressions the worker reads.

use std::fs;
use std::io::{Cursor, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use zip::write::SimpleFileOptions;

pub(super) enum Z<'a> {
    File(&'a [u8], u32),
    Dir,
    Link(&'a str),
}

pub(super) fn zip_of(entries: &[(&str, Z<'_>)]) -> Vec<u8> {
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

pub(super) enum T<'a> {
    File(&'a [u8], u32),
    Dir,
    Symlink(&'a [u8]),
    Hardlink(&'a [u8]),
    Fifo,
}

/// A tar whose names are written raw, so hostile ones can be built too.
pub(super) fn tar_of(entries: &[(&[u8], T<'_>)]) -> Vec<u8> {
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

pub(super) fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub(super) fn bzip(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub(super) fn xz(data: &[u8]) -> Vec<u8> {
    let mut w = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap()
}

pub(super) fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

pub(super) fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}
