//! One skill from its `agent.skills[]` entry to its folder: resolve the version, download the
//! archive, unpack it beside the destination ([`super::extract`]) and move it into place.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use mnemo_client::{Client, ClientError, SessionSkill};

use super::extract::{dir_builder, extract};
use super::{MAX_ARCHIVE_BYTES, MAX_EXTRACTED_BYTES};
use mnemo_sync::fs::host;

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
    let root = match host::canonicalize(&workdir.join("skills")) {
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
    let dest = host::canonicalize(&root.join(dirname))?;
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

    use super::*;
    use crate::skills::archives::{T, Z, gzip, mode, read, tar_of, zip_of};

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

    /// `found`, or the API's 404 when there is nothing.
    fn found_or_404(found: Option<impl IntoResponse>) -> Response {
        let Some(found) = found else {
            let body =
                json!({"type": "error", "error": {"type": "not_found_error", "message": "no such skill version"}});
            return (StatusCode::NOT_FOUND, axum::Json(body)).into_response();
        };
        found.into_response()
    }

    async fn version(
        State(m): State<Arc<Mock>>,
        UrlPath((skill, version)): UrlPath<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        m.note(format!("/v1/skills/{skill}/versions/{version}"), &headers);
        found_or_404(m.versions.get(&(skill, version)).map(|v| axum::Json(v.clone())))
    }

    async fn content(
        State(m): State<Arc<Mock>>,
        UrlPath((skill, version)): UrlPath<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        m.note(format!("/v1/skills/{skill}/versions/{version}/content"), &headers);
        found_or_404(m.contents.get(&(skill, version)).cloned())
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
