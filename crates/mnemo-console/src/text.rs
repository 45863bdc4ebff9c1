//! How values read on a page: times, sizes, actors, numbered lines and line diffs. Templates
//! get these as plain strings (askama escapes them); nothing here builds markup.

use mnemo_api::{Actor, Timestamp};
use similar::{ChangeTag, TextDiff};

/// `2026-12-01 19:49:14 UTC`.
pub(crate) fn when(t: &Timestamp) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// An RFC 3339 time from the API's string fields, read the same way as [`when`].
pub(crate) fn when_str(s: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(s).map_or_else(|_| s.to_owned(), |t| when(&t.to_utc()))
}

/// `812 B`, `4.1 KiB`, `2.0 MiB`.
pub(crate) fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.1} MiB", b / KIB / KIB)
    } else {
        format!("{:.1} GiB", b / KIB / KIB / KIB)
    }
}

/// Who made a version, as a page shows it: a label and, for a session, where to see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActorView {
    pub(crate) label: String,
    pub(crate) link: Option<String>,
    /// The person it names, when it is one ([`name_people`] puts their name and email in the label).
    pub(crate) user: Option<String>,
}

/// Names the people among `views` by their name and email (one lookup per person); a person
/// removed since stays `user {id}`.
pub(crate) async fn name_people(
    console: &crate::Console,
    views: Vec<&mut ActorView>,
) -> Result<(), crate::page::PageError> {
    let mut names: std::collections::HashMap<String, Option<String>> = std::collections::HashMap::new();
    for view in views {
        let Some(user) = view.user.clone() else { continue };
        if !names.contains_key(&user) {
            let named = match user.parse::<mnemo_api::UserId>() {
                Ok(id) => match console.store.get_user(&id).await {
                    Ok(person) => Some(format!("{} ({})", person.name, person.email)),
                    Err(mnemo_store::StoreError::NotFound { .. }) => None,
                    Err(err) => return Err(err.into()),
                },
                Err(_) => None,
            };
            names.insert(user.clone(), named);
        }
        if let Some(Some(label)) = names.get(&user) {
            view.label.clone_from(label);
        }
    }
    Ok(())
}

pub(crate) fn actor(actor: Option<&Actor>) -> ActorView {
    match actor {
        None => ActorView { label: "unknown".into(), link: None, user: None },
        Some(Actor::ApiActor { api_key_id }) => {
            ActorView { label: format!("API key {api_key_id}"), link: None, user: None }
        }
        Some(Actor::SessionActor { session_id }) => ActorView {
            label: format!("session {session_id}"),
            link: Some(format!("/console/sessions/{session_id}")),
            user: None,
        },
        Some(Actor::UserActor { user_id }) => {
            ActorView { label: format!("user {user_id}"), link: None, user: Some(user_id.clone()) }
        }
        Some(Actor::ServiceAccountActor { service_account_id }) => {
            ActorView { label: format!("service account {service_account_id}"), link: None, user: None }
        }
    }
}

/// One numbered line of a memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub(crate) number: usize,
    pub(crate) text: String,
}

/// A memory's content as numbered lines (an empty memory has none).
pub(crate) fn lines(content: &str) -> Vec<Line> {
    content.lines().enumerate().map(|(i, text)| Line { number: i + 1, text: text.to_owned() }).collect()
}

/// One row of a line diff: `kind` is `same`, `added`, `removed` or `gap` (unchanged lines left
/// out between hunks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffLine {
    pub(crate) kind: &'static str,
    pub(crate) old: Option<usize>,
    pub(crate) new: Option<usize>,
    pub(crate) text: String,
}

impl DiffLine {
    pub(crate) fn sign(&self) -> &'static str {
        match self.kind {
            "added" => "+",
            "removed" => "−",
            _ => " ",
        }
    }

    pub(crate) fn old_number(&self) -> String {
        self.old.map(|n| n.to_string()).unwrap_or_default()
    }

    pub(crate) fn new_number(&self) -> String {
        self.new.map(|n| n.to_string()).unwrap_or_default()
    }
}

/// What changed from `old` to `new`, line by line, with three lines of context around each
/// change.
pub(crate) fn diff(old: &str, new: &str) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for (i, group) in diff.grouped_ops(3).iter().enumerate() {
        if i > 0 {
            out.push(DiffLine { kind: "gap", old: None, new: None, text: "…".into() });
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let kind = match change.tag() {
                    ChangeTag::Equal => "same",
                    ChangeTag::Insert => "added",
                    ChangeTag::Delete => "removed",
                };
                let text = change.value().strip_suffix('\n').unwrap_or(change.value());
                let text = text.strip_suffix('\r').unwrap_or(text).to_owned();
                out.push(DiffLine {
                    kind,
                    old: change.old_index().map(|n| n + 1),
                    new: change.new_index().map(|n| n + 1),
                    text,
                });
            }
        }
    }
    out
}

/// Text from a browser's form: a `<textarea>` sends line breaks as CRLF. They become LF unless
/// the text they replace used CRLF itself.
pub(crate) fn from_form(text: &str, keep_crlf: bool) -> String {
    if keep_crlf { text.to_owned() } else { text.replace("\r\n", "\n") }
}

/// `1 memory`, `3 memories`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn a_diff_marks_changed_lines_and_folds_distant_context() {
        let old: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let new = old.replace("line 2\n", "line two\n").replace("line 19\n", "");
        let rows = diff(&old, &new);
        let removed: Vec<_> = rows.iter().filter(|r| r.kind == "removed").map(|r| r.text.as_str()).collect();
        let added: Vec<_> = rows.iter().filter(|r| r.kind == "added").map(|r| r.text.as_str()).collect();
        assert_eq!(removed, ["line 2", "line 19"]);
        assert_eq!(added, ["line two"]);
        assert_eq!(rows.iter().filter(|r| r.kind == "gap").count(), 1, "{rows:?}");
        assert!(diff("same\n", "same\n").is_empty());
    }

    #[test]
    fn form_text_loses_crlf_unless_the_memory_had_it() {
        assert_eq!(from_form("a\r\nb", false), "a\nb");
        assert_eq!(from_form("a\r\nb", true), "a\r\nb");
    }

    #[test]
    fn clip_cuts_on_characters() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hi", 2), "hi");
    }
}
