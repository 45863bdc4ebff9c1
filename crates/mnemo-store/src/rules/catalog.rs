//! The rules of the objects around the memory and the queue: memory stores, environments and
//! their keys, agents, and what a new session is made of.
//!
//! Each function takes the stored object(s) a backend loaded in its transaction and returns
//! the object to write, or the refusal.

use std::collections::{BTreeMap, HashSet};

use mnemo_api::{
    Agent, AgentParams, AgentSpec, Environment, EnvironmentId, EnvironmentKey, MemoryStore, MemoryStoreResource,
    Session, config_type, mount_paths, render_memory_prompt, validate_metadata,
};
use serde_json::{Value, json};

use crate::{EnvironmentPatch, ErrorCode, MemoryStorePatch, NewSession, StoreError};

/// A store with `patch` applied; an archived store cannot be updated.
pub fn update_store(store: &MemoryStore, patch: MemoryStorePatch) -> Result<MemoryStore, StoreError> {
    crate::rules::memory::check_writable(store)?;
    let mut next = store.clone();
    if let Some(name) = patch.name {
        next.name = name;
    }
    if let Some(description) = patch.description {
        next.description = description;
    }
    if let Some(changes) = &patch.metadata {
        next.metadata =
            mnemo_api::apply_metadata_patch(&store.metadata, changes).map_err(|e| StoreError::Invalid(e.0))?;
    }
    Ok(next)
}

fn environment_archived(id: &EnvironmentId, what: &str) -> StoreError {
    StoreError::Coded { code: ErrorCode::EnvironmentArchived, message: format!("environment `{id}` is archived{what}") }
}

/// An environment with `patch` applied. An archived environment cannot be updated, nor can its
/// `config.type` change; a metadata value of `None` or `""` removes the key.
pub fn update_environment(env: &Environment, patch: EnvironmentPatch) -> Result<Environment, StoreError> {
    if env.archived_at.is_some() {
        return Err(environment_archived(&env.id, " and cannot be updated"));
    }
    let mut next = env.clone();
    if let Some(config) = patch.config {
        if config_type(&config) != config_type(&env.config) {
            return Err(StoreError::Coded {
                code: ErrorCode::InvalidConfigTypeChange,
                message: format!(
                    "the config type of environment `{}` cannot change from `{}` to `{}`",
                    env.id,
                    config_type(&env.config).unwrap_or("?"),
                    config_type(&config).unwrap_or("?")
                ),
            });
        }
        next.config = config;
    }
    if let Some(name) = patch.name {
        next.name = name;
    }
    if let Some(description) = patch.description {
        next.description = description;
    }
    if let Some(scope) = patch.scope {
        next.scope = Some(scope);
    }
    if let Some(changes) = patch.metadata {
        let cleared = changes.into_iter().map(|(k, v)| (k, v.filter(|v| !v.is_empty()))).collect();
        next.metadata = patch_metadata(&env.metadata, &cleared, Some(ErrorCode::InvalidMetadata))?;
    }
    Ok(next)
}

/// An archived environment takes no new keys.
pub fn check_takes_keys(env: &Environment) -> Result<(), StoreError> {
    match env.archived_at {
        Some(_) => Err(environment_archived(&env.id, "; it takes no new keys")),
        None => Ok(()),
    }
}

/// A key is reached only through its own environment: under any other, it does not exist.
pub fn check_key_of(key: &EnvironmentKey, environment: &EnvironmentId) -> Result<(), StoreError> {
    if key.environment_id != *environment {
        return Err(StoreError::not_found("environment key", &key.id));
    }
    Ok(())
}

/// Metadata with `patch` applied (`None` removes a key), checked against the limits. `code`:
/// the error code a refusal carries, if any.
pub fn patch_metadata(
    current: &BTreeMap<String, String>,
    patch: &BTreeMap<String, Option<String>>,
    code: Option<ErrorCode>,
) -> Result<BTreeMap<String, String>, StoreError> {
    let mut next = current.clone();
    for (k, v) in patch {
        match v {
            Some(v) => next.insert(k.clone(), v.clone()),
            None => next.remove(k),
        };
    }
    validate_metadata(&next).map_err(|e| match code {
        Some(code) => StoreError::Coded { code, message: e.0 },
        None => StoreError::Invalid(e.0),
    })?;
    Ok(next)
}

/// The spec of an agent's next version: `params` over the latest version `base`. `None`: the
/// change changes nothing (no new version). An archived agent cannot be updated; a `base`
/// other than the latest version is a conflict.
pub fn update_agent(current: &Agent, base: u32, params: &AgentParams) -> Result<Option<AgentSpec>, StoreError> {
    if current.archived_at.is_some() {
        return Err(StoreError::Invalid(format!("agent `{}` is archived and cannot be updated", current.id)));
    }
    if base != current.version {
        return Err(StoreError::Conflict(format!(
            "agent `{}` is at version {}, not {base}; retrieve it and apply the change again",
            current.id, current.version
        )));
    }
    let mut spec = current.spec.clone();
    spec.apply(params).map_err(|e| StoreError::Invalid(e.0))?;
    Ok((spec != current.spec).then_some(spec))
}

/// What a new session is made of.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    /// The agent as the session keeps it, overrides applied.
    pub agent: Value,
    /// Its memory stores, snapshotted, with distinct mount paths.
    pub resources: Vec<MemoryStoreResource>,
    pub memory_prompt: Option<String>,
    /// Queue a work item for it (a self-hosted environment).
    pub enqueue_work: bool,
}

/// The agent snapshot a session keeps: the agent's fields, with overrides replacing values.
fn snapshot(agent: &Agent, overrides: Option<&AgentParams>) -> Result<Value, StoreError> {
    let mut spec = agent.spec.clone();
    if let Some(o) = overrides {
        let only = AgentParams {
            model: o.model.clone(),
            system: o.system.clone(),
            tools: o.tools.clone(),
            mcp_servers: o.mcp_servers.clone(),
            skills: o.skills.clone(),
            ..Default::default()
        };
        spec.apply(&only).map_err(|e| StoreError::Invalid(e.0))?;
    }
    Ok(json!({
        "type": "agent",
        "id": agent.id,
        "version": agent.version,
        "name": spec.name,
        "description": spec.description,
        "system": spec.system,
        "model": spec.model,
        "tools": spec.tools,
        "mcp_servers": spec.mcp_servers,
        "skills": spec.skills,
        "execution_identity": spec.execution_identity,
        "multiagent": spec.multiagent,
    }))
}

/// Plans a new session from what the backend found: its environment (`None`: not found), its
/// agent (or the failure to find it), and the store of each attachment, in order (`None`: not
/// found). Everything a reference cannot resolve is a `400`, naming it.
pub fn plan_session(
    new: &NewSession,
    environment: Option<&Environment>,
    agent: Result<Agent, StoreError>,
    stores: &[Option<MemoryStore>],
) -> Result<SessionPlan, StoreError> {
    let env = environment.ok_or_else(|| StoreError::Invalid(format!("environment `{}` not found", new.environment)))?;
    if env.archived_at.is_some() {
        return Err(StoreError::Invalid(format!("environment `{}` is archived; it takes no new sessions", env.id)));
    }
    let agent = agent.map_err(|e| match e {
        StoreError::NotFound { kind, id } => StoreError::Invalid(format!("{kind} `{id}` not found")),
        other => other,
    })?;
    if agent.archived_at.is_some() {
        return Err(StoreError::Invalid(format!("agent `{}` is archived; it takes no new sessions", agent.id)));
    }
    let agent_json = snapshot(&agent, new.agent.overrides.as_ref())?;
    let mut seen = HashSet::new();
    let mut found = Vec::with_capacity(new.attachments.len());
    for (a, store) in new.attachments.iter().zip(stores.iter().chain(std::iter::repeat(&None))) {
        if !seen.insert(&a.store) {
            return Err(StoreError::Invalid(format!("memory store `{}` is attached twice", a.store)));
        }
        let store =
            store.as_ref().ok_or_else(|| StoreError::Invalid(format!("memory store `{}` not found", a.store)))?;
        if store.archived_at.is_some() {
            return Err(StoreError::Invalid(format!("memory store `{}` is archived and cannot be attached", a.store)));
        }
        found.push(store);
    }
    let names: Vec<&str> = found.iter().map(|s| s.name.as_str()).collect();
    let resources: Vec<MemoryStoreResource> = new
        .attachments
        .iter()
        .zip(found.iter().zip(mount_paths(&new.mount_root, &names)))
        .map(|(a, (store, path))| MemoryStoreResource {
            memory_store_id: a.store.clone(),
            access: a.access,
            instructions: a.instructions.clone(),
            name: Some(store.name.clone()),
            description: Some(store.description.clone()),
            mount_path: Some(path),
        })
        .collect();
    Ok(SessionPlan {
        agent: agent_json,
        memory_prompt: render_memory_prompt(&resources),
        resources,
        enqueue_work: env.is_self_hosted(),
    })
}

/// A session's new title and metadata; an archived session cannot be updated.
pub fn update_session(
    session: &Session,
    title: Option<Option<String>>,
    metadata: Option<&BTreeMap<String, Option<String>>>,
) -> Result<(Option<String>, BTreeMap<String, String>), StoreError> {
    if session.archived_at.is_some() {
        return Err(StoreError::Invalid(format!("session `{}` is archived and cannot be updated", session.id)));
    }
    let title = title.unwrap_or_else(|| session.title.clone());
    let metadata = match metadata {
        Some(patch) => patch_metadata(&session.metadata, patch, None)?,
        None => session.metadata.clone(),
    };
    Ok((title, metadata))
}

#[cfg(test)]
mod tests;
