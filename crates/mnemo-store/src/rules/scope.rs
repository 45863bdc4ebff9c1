//! Who may do what: the decision for a caller (its credential) × an action on a resource.
//!
//! [`decide`] is pure. What it needs from stored state — the environment of a session, how a
//! session has a store attached — the caller of `decide` looks up first ([`attachment_lookup`]
//! says when a lookup is needed).

use mnemo_api::{Access, Actor, EnvironmentId, MemoryStoreId, OrgRole, SessionId, UserId, WorkId, WorkspaceRole};

use crate::Credential;
use crate::rules::session::EventAuthor;

/// What is done to one memory store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOp {
    /// Read the store, its memories or its versions.
    Read,
    /// Create, change or delete memories.
    WriteMemories,
    /// Change, archive or delete the store; redact versions.
    Administer,
}

/// What is done on a work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkOp {
    /// Poll the queue; acknowledge a delivery.
    Take,
    /// Heartbeat an item.
    Heartbeat,
    /// Stop an item.
    Stop,
    /// List the queue or read its statistics.
    Inspect,
    /// Retrieve or update an item; queue a healthcheck.
    Manage,
}

/// What is done on the Admin API (`/v1/organizations/…`, admin-api.md §5, §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrgOp {
    /// `GET /v1/organizations/me`: which organization this is.
    ReadOrganization,
    /// Workspaces: create, read, list, update, archive.
    Workspaces,
    /// API keys: mint, read, list, update.
    ApiKeys,
    /// Organization and workspace rate limits: read and override.
    RateLimits,
    /// People and invites: list, read, change roles, remove, sign out; invite and revoke.
    People,
    /// Workspace members: add, read, list, change roles, remove.
    Members,
}

/// What is managed inside one workspace (the caller's own), where a person's workspace role
/// decides (spec §8.6): the console's pages of the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceOp {
    /// Mint, deactivate, archive the workspace's API keys.
    ApiKeys,
    /// Add, change, remove the workspace's members.
    Members,
    /// The workspace's rate limits, webhook endpoints and settings.
    Settings,
}

/// An action on a resource.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    /// The Admin API, organization-wide: a person reaches it as an org `admin` only (beyond
    /// reading which organization this is); their own workspace is managed through
    /// [`Action::Workspace`].
    Organization(OrgOp),
    /// Managing the caller's own workspace.
    Workspace(WorkspaceOp),
    /// Creating, changing, archiving or deleting environments and their keys, agents and
    /// sessions.
    Administer,
    /// Reading environments and their keys, agents, and the list of sessions (not a session's
    /// events: that is [`Action::Session`]). Whatever may administer may inspect.
    Inspect,
    /// Reading a session, its events or its stream, or posting events to it.
    Session { session: &'a SessionId, environment: &'a EnvironmentId },
    /// Listing memory stores, or creating one (`create`).
    MemoryStores { create: bool },
    /// Searching memories across stores (`GET /v1/memories:search`): an API key across its
    /// workspace, a sessions token across the stores its session has attached (the caller
    /// narrows the search to those, read-only ones included).
    SearchMemories,
    /// One memory store. `attached`: how the caller's own session has the store attached
    /// (looked up for sessions tokens only, see [`attachment_lookup`]).
    Memory { store: &'a MemoryStoreId, op: MemoryOp, attached: Option<Access> },
    /// An environment's work queue, or one item of it.
    Work { environment: &'a EnvironmentId, item: Option<&'a WorkId>, op: WorkOp },
    /// Reading the organization's audit log.
    ReadAuditLog,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// No credential, or none that is known (`401`).
    Unauthenticated(String),
    /// The credential does not reach this (`403`).
    Forbidden(String),
}

/// A person's roles where they act (admin-api.md §8.6): their org role, and their role in the
/// workspace of the [`crate::Principal`] (an org `admin` is `workspace_admin` everywhere, see
/// [`crate::rules::people::workspace_role`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersonRole {
    pub org: OrgRole,
    pub workspace: WorkspaceRole,
}

/// The rows of the roles table (spec §8.6): what a person's roles let them do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Can {
    /// See the workspace's stores, memories, history, environments, agents.
    See,
    /// See session transcripts; export a store or download a memory as a file.
    SeeTranscripts,
    /// Edit, restore, redact memories; create or archive stores, agents, environments,
    /// sessions; mint environment keys.
    Edit,
    /// Mint, deactivate, archive the workspace's API keys.
    ManageApiKeys,
    /// Manage members, workspace rate limits, webhook endpoints, workspace settings.
    ManageWorkspace,
    /// Create or archive workspaces; users, invites, admin keys: the organization.
    ManageOrganization,
}

impl PersonRole {
    /// Whether these roles grant `can` (one cell of the spec's table).
    pub fn can(self, can: Can) -> bool {
        if self.org == OrgRole::Admin {
            return true;
        }
        use WorkspaceRole::*;
        match can {
            Can::See => true,
            Can::SeeTranscripts => matches!(self.workspace, WorkspaceDeveloper | WorkspaceAdmin),
            Can::Edit | Can::ManageApiKeys => {
                matches!(self.workspace, WorkspaceRestrictedDeveloper | WorkspaceDeveloper | WorkspaceAdmin)
            }
            Can::ManageWorkspace => self.workspace == WorkspaceAdmin,
            Can::ManageOrganization => false,
        }
    }
}

/// Why a person is refused what their role does not grant, in words naming the role.
fn person_refusal(role: PersonRole, can: Can) -> String {
    let what = match can {
        Can::See => "see this workspace",
        Can::SeeTranscripts => "see session transcripts or export memory",
        Can::Edit => "change this workspace's memories, stores, agents, environments or sessions",
        Can::ManageApiKeys => "manage this workspace's API keys",
        Can::ManageWorkspace => "manage this workspace's members or settings",
        Can::ManageOrganization => "manage the organization (workspaces, people, invites, admin keys)",
    };
    if can == Can::ManageOrganization {
        format!("your role does not let you {what}; only an org admin may")
    } else {
        format!("your role in this workspace ({}) does not let you {what}", role.workspace.as_str())
    }
}

/// The session whose attachment of a store a memory action needs looked up: the caller's own,
/// when it holds a sessions token.
pub fn attachment_lookup(caller: &Credential) -> Option<&SessionId> {
    match caller {
        Credential::SessionToken { session, .. } => session.as_ref(),
        Credential::AdminKey(_)
        | Credential::ApiKey(_)
        | Credential::EnvironmentKey { .. }
        | Credential::Person { .. } => None,
    }
}

/// Who the memory versions a caller writes record: an API key, a session (through its token)
/// or a person; `None` for a credential that writes no memory.
pub fn memory_actor(caller: &Credential) -> Option<Actor> {
    match caller {
        Credential::ApiKey(id) => Some(Actor::ApiActor { api_key_id: id.clone() }),
        Credential::SessionToken { session: Some(session), .. } => {
            Some(Actor::SessionActor { session_id: session.clone() })
        }
        Credential::Person { user, .. } => Some(Actor::UserActor { user_id: user.to_string() }),
        Credential::SessionToken { session: None, .. }
        | Credential::EnvironmentKey { .. }
        | Credential::AdminKey(_) => None,
    }
}

/// Who a caller appends events as (what it may post is [`EventAuthor::may_post`]); `None` for a
/// healthcheck's sessions token, which reaches no session, and an admin key.
pub fn event_author(caller: &Credential) -> Option<EventAuthor> {
    match caller {
        Credential::ApiKey(id) => Some(EventAuthor::ApiKey(id.clone())),
        Credential::EnvironmentKey { id, .. } => Some(EventAuthor::EnvironmentKey(id.clone())),
        Credential::SessionToken { work, session: Some(session), .. } => {
            Some(EventAuthor::SessionToken { session: session.clone(), work: work.clone() })
        }
        Credential::Person { user, .. } => Some(EventAuthor::Person(user.clone())),
        Credential::SessionToken { session: None, .. } | Credential::AdminKey(_) => None,
    }
}

/// Why a request without a (known) credential is refused.
pub const MISSING_CREDENTIALS: &str = "missing credentials: send `Authorization: Bearer <key>` or `x-api-key: <key>`";

/// Why an admin key is refused on a Managed Agents endpoint (admin-api.md §8.2, as hosted).
pub const ADMIN_KEY_OUTSIDE_ADMIN_API: &str =
    "an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here";

fn forbid(message: impl Into<String>) -> Decision {
    Decision::Forbidden(message.into())
}

/// Whether `caller` may call an endpoint at all, before any action is named: an admin key
/// reaches only the Admin API (`admin_api`: the path is under `/v1/organizations/`). Checked as
/// the caller is identified, so an admin key elsewhere is refused before its input is read.
pub fn reach(caller: &Credential, admin_api: bool) -> Decision {
    match caller {
        Credential::AdminKey(_) if !admin_api => forbid(ADMIN_KEY_OUTSIDE_ADMIN_API),
        _ => Decision::Allow,
    }
}

/// On the Admin API, the person whose role in one workspace decides an operation about that
/// workspace (spec §8.4, §8.6: a developer mints the API keys of a workspace they develop in, a
/// workspace admin manages its members and rate limits): a person who is not an org admin.
/// Everyone else is judged by the organization's row ([`Action::Organization`]).
pub fn judged_in_workspace(caller: &Credential) -> Option<&UserId> {
    match caller {
        Credential::Person { user, role } if role.org != OrgRole::Admin => Some(user),
        _ => None,
    }
}

/// The row of a workspace's own table an Admin API operation about one workspace falls under,
/// for a person [`judged_in_workspace`]; `None` for what only the organization does.
pub fn workspace_row(op: OrgOp) -> Option<WorkspaceOp> {
    match op {
        OrgOp::ApiKeys => Some(WorkspaceOp::ApiKeys),
        OrgOp::Members => Some(WorkspaceOp::Members),
        OrgOp::RateLimits => Some(WorkspaceOp::Settings),
        OrgOp::ReadOrganization | OrgOp::Workspaces | OrgOp::People => None,
    }
}

/// Whether `caller` may take `action`.
pub fn decide(caller: Option<&Credential>, action: Action<'_>) -> Decision {
    let Some(caller) = caller else {
        return Decision::Unauthenticated(MISSING_CREDENTIALS.into());
    };
    if let Credential::Person { role, .. } = caller {
        return person(*role, action);
    }
    match action {
        Action::Organization(op) => organization(caller, op),
        Action::Workspace(op) => workspace(caller, op),
        Action::ReadAuditLog => match caller {
            Credential::AdminKey(_) => Decision::Allow,
            _ => forbid("the audit log is read with an admin key"),
        },
        _ if matches!(caller, Credential::AdminKey(_)) => forbid(ADMIN_KEY_OUTSIDE_ADMIN_API),
        Action::Administer | Action::Inspect => match caller {
            Credential::ApiKey(_) => Decision::Allow,
            _ => forbid("this endpoint needs an API key; environment keys and sessions tokens are not accepted here"),
        },
        Action::Session { session, environment } => {
            let reaches = match caller {
                Credential::ApiKey(_) => true,
                Credential::EnvironmentKey { environment: own, .. } => own == environment,
                Credential::SessionToken { session: own, .. } => own.as_ref() == Some(session),
                Credential::AdminKey(_) | Credential::Person { .. } => false,
            };
            if reaches {
                Decision::Allow
            } else {
                forbid(format!("this credential does not reach session `{session}`"))
            }
        }
        Action::MemoryStores { .. } | Action::SearchMemories | Action::Memory { .. } => memory(caller, action),
        Action::Work { environment, item, op } => work(caller, environment, item, op),
    }
}

/// What a person may do, by their roles (spec §8.6): each action is one row of [`Can`]. The
/// workspace they act in is their principal's, so every workspace action is about that one.
fn person(role: PersonRole, action: Action<'_>) -> Decision {
    let can = match action {
        Action::Organization(OrgOp::ReadOrganization) => Can::See,
        Action::Organization(_) | Action::ReadAuditLog => Can::ManageOrganization,
        Action::Workspace(WorkspaceOp::ApiKeys) => Can::ManageApiKeys,
        Action::Workspace(WorkspaceOp::Members | WorkspaceOp::Settings) => Can::ManageWorkspace,
        Action::Inspect | Action::MemoryStores { create: false } | Action::SearchMemories => Can::See,
        Action::Memory { op: MemoryOp::Read, .. } => Can::See,
        Action::Session { .. } => Can::SeeTranscripts,
        Action::Administer
        | Action::MemoryStores { create: true }
        | Action::Memory { op: MemoryOp::WriteMemories | MemoryOp::Administer, .. } => Can::Edit,
        // Workers' calls: a person stops, inspects and manages items as an API key may.
        Action::Work { op: WorkOp::Take | WorkOp::Heartbeat, .. } => {
            return forbid("this call needs this environment's key or this work item's sessions token");
        }
        Action::Work { .. } => Can::Edit,
    };
    if role.can(can) { Decision::Allow } else { forbid(person_refusal(role, can)) }
}

/// Managing a workspace without a person's role: an API key (a console session opened with
/// one acts as `workspace_developer`, spec §8.2) manages the workspace's API keys only.
fn workspace(caller: &Credential, op: WorkspaceOp) -> Decision {
    match (caller, op) {
        (Credential::ApiKey(_), WorkspaceOp::ApiKeys) => Decision::Allow,
        (Credential::ApiKey(_), _) => forbid("an API key does not manage a workspace's members or settings"),
        (Credential::AdminKey(_), _) => forbid(ADMIN_KEY_OUTSIDE_ADMIN_API),
        _ => forbid("environment keys and sessions tokens do not manage a workspace"),
    }
}

/// Why a workspace credential is refused on the Admin API.
pub const ADMIN_API_NEEDS_ADMIN_KEY: &str = "the Admin API needs an admin key (`sk-mnemo-admin-…`); this credential reaches only `GET /v1/organizations/me` here";

/// Who may do what on the Admin API: an admin key everything; an API key only which
/// organization it is in; worker credentials nothing.
fn organization(caller: &Credential, op: OrgOp) -> Decision {
    let allowed = match caller {
        Credential::AdminKey(_) => true,
        Credential::ApiKey(_) => op == OrgOp::ReadOrganization,
        // Judged by their roles in `person`, before this.
        Credential::EnvironmentKey { .. } | Credential::SessionToken { .. } | Credential::Person { .. } => false,
    };
    if allowed {
        Decision::Allow
    } else if matches!(caller, Credential::ApiKey(_)) {
        forbid(ADMIN_API_NEEDS_ADMIN_KEY)
    } else {
        forbid("environment keys and sessions tokens do not reach the Admin API")
    }
}

fn memory(caller: &Credential, action: Action<'_>) -> Decision {
    let session = match caller {
        Credential::AdminKey(_) => return forbid(ADMIN_KEY_OUTSIDE_ADMIN_API),
        Credential::ApiKey(_) => return Decision::Allow,
        Credential::Person { role, .. } => return person(*role, action),
        Credential::EnvironmentKey { .. } => {
            return forbid(
                "the memory endpoints do not accept an environment key; use an API key or the work item's sessions token",
            );
        }
        Credential::SessionToken { session: Some(session), .. } => session,
        Credential::SessionToken { session: None, .. } => {
            return forbid("a healthcheck's sessions token reaches no memory store");
        }
    };
    let (store, op, attached) = match action {
        Action::Memory { store, op, attached } => (store, op, attached),
        // Only across its session's attached stores: the search is narrowed to them.
        Action::SearchMemories => return Decision::Allow,
        _ => return forbid("a sessions token cannot create or list memory stores"),
    };
    let Some(access) = attached else {
        return forbid(format!(
            "memory store `{store}` is not attached to session `{session}`, which this sessions token is scoped to"
        ));
    };
    match op {
        MemoryOp::Read => Decision::Allow,
        MemoryOp::Administer => forbid("a sessions token cannot change a memory store or redact its versions"),
        MemoryOp::WriteMemories if access == Access::ReadOnly => {
            forbid(format!("memory store `{store}` is attached read-only to session `{session}`; it cannot be written"))
        }
        MemoryOp::WriteMemories => Decision::Allow,
    }
}

fn work(caller: &Credential, environment: &EnvironmentId, item: Option<&WorkId>, op: WorkOp) -> Decision {
    let allowed = match caller {
        Credential::AdminKey(_) | Credential::Person { .. } => false,
        Credential::ApiKey(_) => matches!(op, WorkOp::Stop | WorkOp::Inspect | WorkOp::Manage),
        Credential::EnvironmentKey { environment: own, .. } => own == environment && op != WorkOp::Manage,
        Credential::SessionToken { work, environment: own, .. } => {
            matches!(op, WorkOp::Heartbeat | WorkOp::Stop) && own == environment && item == Some(work)
        }
    };
    if allowed {
        return Decision::Allow;
    }
    let need = match op {
        WorkOp::Take => "this environment's key",
        WorkOp::Heartbeat => "this environment's key or this work item's sessions token",
        WorkOp::Stop | WorkOp::Inspect => "an API key, this environment's key or this work item's sessions token",
        WorkOp::Manage => "an API key",
    };
    forbid(format!("this call needs {need}"))
}

#[cfg(test)]
mod tests;
