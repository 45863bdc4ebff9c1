//! A session as the worker reads it: its status, its memory-store resources and its agent's
//! skills — and nothing else.
//!
//! [`WorkerSession`] is deliberately not [`mnemo_api::Session`]. That type is the shape `mnemo
//! serve` writes: every resource a `memory_store`, `stats`, `usage`, `environment_id` and the
//! timestamps required. The hosted API also lists `file` and repository resources and may add or
//! omit fields, and a worker must serve those sessions all the same. So every field here is
//! optional, a value of an unexpected type reads as absent, a list entry that is not an object
//! reads as empty, and unknown fields and resource kinds are ignored; what the worker does with
//! an absent value (a default mount path, a skill skipped with a warning) is its own rule.

use reqwest::Method;
use serde::Deserialize;

use crate::lenient::{lenient, list, string, text};
use crate::{Client, Result};

/// The parts of a session the worker reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct WorkerSession {
    /// `idle`, `running`, `rescheduling`, `terminated`, …
    #[serde(deserialize_with = "string")]
    pub status: Option<String>,
    /// Every resource, in order, whatever its kind.
    #[serde(deserialize_with = "list")]
    pub resources: Vec<SessionResource>,
    #[serde(deserialize_with = "lenient")]
    pub agent: SessionAgent,
}

impl WorkerSession {
    /// Whether the session has ended for good.
    pub fn is_terminated(&self) -> bool {
        self.status.as_deref() == Some("terminated")
    }

    /// The `memory_store` resources, in resource order.
    pub fn memory_stores(&self) -> impl Iterator<Item = &SessionResource> {
        self.resources.iter().filter(|r| r.kind.as_deref() == Some("memory_store"))
    }
}

/// One resource of a session; only a `memory_store` one carries the other fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SessionResource {
    #[serde(rename = "type", deserialize_with = "string")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "string")]
    pub memory_store_id: Option<String>,
    /// `read_write` or `read_only`.
    #[serde(deserialize_with = "string")]
    pub access: Option<String>,
    /// Where the store lands; the worker's default when absent or empty.
    #[serde(deserialize_with = "string")]
    pub mount_path: Option<String>,
    #[serde(deserialize_with = "string")]
    pub name: Option<String>,
}

impl SessionResource {
    /// Whether the store is attached read-only (any other access is read-write).
    pub fn read_only(&self) -> bool {
        self.access.as_deref() == Some("read_only")
    }
}

/// The session's agent, as far as the worker needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SessionAgent {
    #[serde(deserialize_with = "list")]
    pub skills: Vec<SessionSkill>,
}

/// One `agent.skills[]` entry (custom and Anthropic skills alike).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SessionSkill {
    #[serde(rename = "type", deserialize_with = "string")]
    pub kind: Option<String>,
    /// Absent when missing or empty; a number is read as its decimal text.
    #[serde(deserialize_with = "text")]
    pub skill_id: Option<String>,
    /// A version or the alias `latest`; absent when missing or empty, a number read as text.
    #[serde(deserialize_with = "text")]
    pub version: Option<String>,
}

impl Client {
    /// `GET /v1/sessions/{session}`, read leniently (see [`WorkerSession`]).
    pub async fn get_session(&self, session: &str) -> Result<WorkerSession> {
        self.send(|| self.request(Method::GET, &format!("/v1/sessions/{session}"))).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn read(v: Value) -> WorkerSession {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_hosted_session_reads_with_only_what_the_worker_needs() {
        let s = read(json!({
            "type": "session", "id": "sesn_1", "status": "idle",
            "resources": [
                {"type": "file", "file_id": "file_1", "mount_path": "/mnt/f"},
                {"type": "memory_store", "memory_store_id": "memstore_a", "access": "read_only",
                 "mount_path": "/mnt/memory/a", "name": "a", "instructions": null, "extra": 1},
                {"type": "github_repository", "url": "r"},
            ],
            "agent": {"type": "agent", "id": "agent_1", "skills": [
                {"type": "anthropic", "skill_id": "pdf", "version": "latest"},
                {"type": "custom", "skill_id": "skill_1", "version": 1759},
            ]},
            "usage": {"input_tokens": 1},
        }));
        assert!(!s.is_terminated());
        let stores: Vec<_> = s.memory_stores().collect();
        assert_eq!(stores.len(), 1);
        assert_eq!(stores[0].memory_store_id.as_deref(), Some("memstore_a"));
        assert!(stores[0].read_only());
        assert_eq!(stores[0].mount_path.as_deref(), Some("/mnt/memory/a"));
        assert_eq!(s.agent.skills[0].version.as_deref(), Some("latest"));
        assert_eq!(s.agent.skills[1].version.as_deref(), Some("1759"));
        assert!(read(json!({"status": "terminated"})).is_terminated());
    }

    #[test]
    fn odd_values_read_as_absent() {
        let s = read(json!({
            "status": 7,
            "resources": ["nope", {"type": "memory_store", "memory_store_id": 12, "access": "admin", "mount_path": null}],
            "agent": {"skills": [3, {"skill_id": "", "version": true}]},
        }));
        assert_eq!(s.status, None);
        assert_eq!(s.resources[0], SessionResource::default());
        let store = s.memory_stores().next().unwrap();
        assert_eq!((store.memory_store_id.as_deref(), store.mount_path.as_deref()), (None, None));
        assert!(!store.read_only());
        assert_eq!(s.agent.skills, vec![SessionSkill::default(), SessionSkill::default()]);
        assert_eq!(read(json!({"resources": {}, "agent": "x"})), WorkerSession::default());
        assert_eq!(read(json!({})), WorkerSession::default());
    }
}
