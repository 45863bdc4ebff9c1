//! The tools' paths: every store is a folder under [`ROOT`], named as a session's mount of it
//! would be (`mnemo_api::mount_paths`), so `/memories/notes/todo.md` is `/todo.md` of the store
//! mounted at `/memories/notes`. A path is parsed once, here, into a [`Target`].

use mnemo_api::{MemoryPath, MemoryStoreId};

/// Where the stores' folders are.
pub const ROOT: &str = "/memories";

/// One store the server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub store: MemoryStoreId,
    /// The store's name (shown in listings).
    pub name: String,
    /// Its folder under [`ROOT`], e.g. `/memories/notes`.
    pub folder: String,
    /// Writes are refused (`--read-only`).
    pub read_only: bool,
}

impl Mount {
    /// Mounts for stores `(id, name)`, in order, under [`ROOT`].
    pub fn all(stores: Vec<(MemoryStoreId, String)>, read_only: bool) -> Vec<Mount> {
        let names: Vec<&str> = stores.iter().map(|(_, n)| n.as_str()).collect();
        let folders = mnemo_api::mount_paths(ROOT, &names);
        stores
            .into_iter()
            .zip(folders)
            .map(|((store, name), folder)| Mount { store, name, folder, read_only })
            .collect()
    }

    /// The tool path of the memory at `path` in this store.
    pub fn tool_path(&self, path: &str) -> String {
        format!("{}{path}", self.folder)
    }
}

/// What a tool path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target<'m> {
    /// [`ROOT`]: the stores' folders.
    Root,
    /// A path in a store: `None` for the store's own folder, else a memory's path or a folder
    /// of memories (which one depends on what the store holds).
    In(&'m Mount, Option<MemoryPath>),
}

/// Parses a tool path, refusing what is not under [`ROOT`] or not a valid memory path, in words
/// a model can act on.
pub(crate) fn resolve<'m>(mounts: &'m [Mount], raw: &str) -> Result<Target<'m>, String> {
    let trimmed = raw.trim_end_matches('/');
    if trimmed == ROOT || trimmed.is_empty() {
        return Ok(Target::Root);
    }
    let folders = || mounts.iter().map(|m| m.folder.as_str()).collect::<Vec<_>>().join(", ");
    let Some(rest) = trimmed.strip_prefix(ROOT).and_then(|r| r.strip_prefix('/')) else {
        return Err(format!("`{}` is outside {ROOT}: every path starts with one of {}", raw.escape_debug(), folders()));
    };
    let (folder, inner) = rest.split_once('/').map_or((rest, None), |(f, i)| (f, Some(i)));
    let Some(mount) = mounts.iter().find(|m| m.folder[ROOT.len() + 1..] == *folder) else {
        return Err(format!("`{}` is in no memory store: the stores are {}", raw.escape_debug(), folders()));
    };
    match inner {
        None => Ok(Target::In(mount, None)),
        Some(inner) => MemoryPath::parse_request(&format!("/{inner}")).map(|p| Target::In(mount, Some(p))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts() -> Vec<Mount> {
        Mount::all(
            vec![
                ("memstore_a".parse().unwrap(), "Team Notes".into()),
                ("memstore_b".parse().unwrap(), "team notes".into()),
            ],
            false,
        )
    }

    #[test]
    fn stores_are_folders_named_as_their_mounts() {
        let m = mounts();
        assert_eq!(m[0].folder, "/memories/team-notes");
        assert_eq!(m[1].folder, "/memories/team-notes-2", "two names slugging alike get distinct folders");
        assert_eq!(m[0].tool_path("/a/b.md"), "/memories/team-notes/a/b.md");
    }

    #[test]
    fn tool_paths() {
        let m = mounts();
        let path = |p: &str| Some(MemoryPath::parse(p).unwrap());
        #[rustfmt::skip]
        let ok = [
            ("/memories", Target::Root),
            ("/memories/", Target::Root),
            ("/memories/team-notes", Target::In(&m[0], None)),
            ("/memories/team-notes-2/", Target::In(&m[1], None)),
            ("/memories/team-notes/todo.md", Target::In(&m[0], path("/todo.md"))),
            ("/memories/team-notes/a/b/c.md", Target::In(&m[0], path("/a/b/c.md"))),
            ("/memories/team-notes/dir/", Target::In(&m[0], path("/dir"))),
        ];
        for (raw, expected) in ok {
            assert_eq!(resolve(&m, raw), Ok(expected), "{raw}");
        }
        #[rustfmt::skip]
        let refused = [
            ("/etc/passwd", "is outside /memories"),
            ("memories/team-notes/x", "is outside /memories"),
            ("/memoriesx/team-notes", "is outside /memories"),
            ("/memories/other/x.md", "is in no memory store: the stores are /memories/team-notes, /memories/team-notes-2"),
            ("/memories/team-notes/../team-notes-2/x", "`.` or `..` segment"),
            ("/memories/team-notes/a//b", "empty segment"),
            ("/memories/team-notes/a\u{0}b", "U+0000"),
        ];
        for (raw, message) in refused {
            let e = resolve(&m, raw).unwrap_err();
            assert!(e.contains(message), "{raw}: {e}");
        }
        let long = format!("/memories/team-notes/{}", "x".repeat(2000));
        assert!(resolve(&m, &long).unwrap_err().contains("the limit is"), "overlong");
    }
}
