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
//!
//! - [`download`](download()) and [`remove`] — resolving, fetching and installing each skill
//!   (`download.rs`);
//! - `extract.rs` — the archive formats, the member screening and the bounded unpacking.

#[cfg(test)]
mod archives;
mod download;
mod extract;

pub use download::{download, remove};

/// The largest archive downloaded for one skill: 256 MiB.
pub const MAX_ARCHIVE_BYTES: u64 = 256 << 20;
/// The most bytes one skill's archive may unpack to (file contents, all files together): 1 GiB.
/// A tar archive's decompressed stream is also cut off at this plus 2 KiB per member of
/// headers, so a compression bomb is never inflated further than that.
pub const MAX_EXTRACTED_BYTES: u64 = 1 << 30;
/// The most members one skill's archive may hold: 100,000.
pub const MAX_MEMBERS: usize = 100_000;
