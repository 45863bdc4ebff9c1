//! The Admin API's wire shapes (`/v1/organizations/*`): the organization, workspaces, API keys,
//! rate limits and the audit log, with their request bodies and validation.
//!
//! The objects are shaped as the reference SDK (`anthropic` 2.10.0, `types/organization/**`)
//! parses them, so `client.organization.*` works against mnemo unchanged; the API-key creation
//! body and the audit log are mnemo extensions (spec `admin-api.md` §8.4, issue 32). The rules
//! that need stored state (the Default workspace, caps, status transitions, buckets) live in
//! `mnemo_store::rules`; what is checked here is what the request alone reveals.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use utoipa::ToSchema;

use crate::Secret;
use crate::environments::double_option;
use crate::ids::{ApiKeyId, AuditEventId, WorkspaceId};
use crate::types::Invalid;
use chrono::{DateTime, Utc};

/// The prefix of admin keys (spec §8.2).
pub const ADMIN_KEY_PREFIX: &str = "sk-mnemo-admin-";
/// The prefix of workspace API keys (spec §8.2).
pub const API_KEY_PREFIX: &str = "sk-mnemo-";
/// The name of the workspace every organization has and that cannot be renamed or archived.
pub const DEFAULT_WORKSPACE_NAME: &str = "Default";
/// The Console colour of a workspace created without one.
pub const DEFAULT_DISPLAY_COLOR: &str = "#6C5BB9";
/// Longest workspace or API key name, in characters.
pub const MAX_ADMIN_NAME_CHARS: usize = 255;
/// Most tags on a workspace.
pub const MAX_WORKSPACE_TAGS: usize = 16;
/// Longest tag key, in characters.
pub const MAX_TAG_KEY_CHARS: usize = 64;
/// Longest tag value, in characters.
pub const MAX_TAG_VALUE_CHARS: usize = 512;
/// What no tag key may start with: the hosted API reserves it.
pub const RESERVED_TAG_PREFIX: &str = "anthropic";
/// Default page size of an Admin API list.
pub const DEFAULT_ADMIN_PAGE_LIMIT: u32 = 20;
/// Largest page size of an Admin API list.
pub const MAX_ADMIN_PAGE_LIMIT: u32 = 1_000;
/// Most ids in a workspace list's `ids[]` filter.
pub const MAX_WORKSPACE_IDS_FILTER: usize = 100;

/// `error.details.error_code` values the Admin API sends (SDK error table, spec §2 and §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdminErrorCode {
    /// Minting or reactivating a key would pass the workspace's active-key cap.
    WorkspaceApiKeyLimitExceeded,
    /// Minting or reactivating an admin key would pass the organization's active-key cap.
    OrgApiKeyLimitExceeded,
    /// `anthropic-workspace-id` names a workspace the credential is not bound to (extension).
    WorkspaceMismatch,
    /// An invited email already belongs to a person of the organization.
    AlreadyMember,
    /// A pending invite for that email exists.
    InviteAlreadyExists,
}

impl AdminErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkspaceApiKeyLimitExceeded => "workspace_api_key_limit_exceeded",
            Self::OrgApiKeyLimitExceeded => "org_api_key_limit_exceeded",
            Self::WorkspaceMismatch => "workspace_mismatch",
            Self::AlreadyMember => "already_member",
            Self::InviteAlreadyExists => "invite_already_exists",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Organization

/// `GET /v1/organizations/me` (`type: "organization"`). The id is a bare UUID, not a tagged id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "organization")]
pub struct Organization {
    pub id: String,
    pub name: String,
}

// ---------------------------------------------------------------------------------------------
// Workspaces

/// Which inference geographies a workspace allows: a list, or the string `"unrestricted"`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AllowedInferenceGeos {
    #[default]
    Unrestricted,
    Only(Vec<String>),
}

const UNRESTRICTED: &str = "unrestricted";

impl Serialize for AllowedInferenceGeos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Unrestricted => s.serialize_str(UNRESTRICTED),
            Self::Only(geos) => geos.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for AllowedInferenceGeos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d)? {
            Raw::List(geos) => Ok(Self::Only(geos)),
            Raw::Word(w) if w == UNRESTRICTED => Ok(Self::Unrestricted),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "allowed_inference_geos must be a list of geographies or \"{UNRESTRICTED}\" (got \"{w}\")"
            ))),
        }
    }
}

impl utoipa::PartialSchema for AllowedInferenceGeos {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type};
        let string = || ObjectBuilder::new().schema_type(SchemaType::Type(Type::String));
        OneOfBuilder::new()
            .item(ArrayBuilder::new().items(string()))
            .item(string().enum_values(Some([UNRESTRICTED])))
            .description(Some("A list of geographies, or `\"unrestricted\"`."))
            .into()
    }
}

impl utoipa::ToSchema for AllowedInferenceGeos {}

/// Where a workspace's data lives and where its inference may run. mnemo stores and echoes it;
/// it has no effect (spec §8.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DataResidency {
    pub workspace_geo: String,
    pub allowed_inference_geos: AllowedInferenceGeos,
    pub default_inference_geo: String,
}

impl Default for DataResidency {
    /// The hosted create defaults: `us` / `unrestricted` / `global`.
    fn default() -> Self {
        Self {
            workspace_geo: "us".into(),
            allowed_inference_geos: AllowedInferenceGeos::Unrestricted,
            default_inference_geo: "global".into(),
        }
    }
}

/// `data_residency` of a create body: every field optional, defaults of [`DataResidency`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DataResidencyParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_geo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_inference_geos: Option<AllowedInferenceGeos>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_inference_geo: Option<String>,
}

/// A workspace (`type: "workspace"`), the isolation unit of every Managed Agents resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "workspace")]
pub struct Workspace {
    pub id: WorkspaceId,
    pub name: String,
    pub display_color: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    pub created_at: DateTime<Utc>,
    pub archived_at: Option<DateTime<Utc>>,
    pub data_residency: DataResidency,
    /// Required by the SDK's type; mnemo has no CMEK compartments, so it is the workspace's id.
    pub compartment_id: String,
    pub external_key_id: Option<String>,
    pub user_profile_id: Option<String>,
}

/// Body of `POST /v1/organizations/workspaces`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceCreate {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_color: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_residency: Option<DataResidencyParams>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_profile_id: Option<String>,
}

/// A create body that passed every check, with its defaults filled in: what a store writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWorkspace {
    pub name: String,
    pub display_color: String,
    pub tags: BTreeMap<String, String>,
    pub data_residency: DataResidency,
}

impl WorkspaceCreate {
    /// Checks the body (spec §8.5) and fills in the defaults.
    pub fn validate(self) -> Result<NewWorkspace, Invalid> {
        validate_admin_name(&self.name)?;
        let display_color = match self.display_color {
            Some(c) => {
                validate_display_color(&c)?;
                c
            }
            None => DEFAULT_DISPLAY_COLOR.to_owned(),
        };
        let tags = self.tags.unwrap_or_default();
        validate_tags(&tags)?;
        refuse_write_once("external_key_id", self.external_key_id.as_deref())?;
        refuse_write_once("user_profile_id", self.user_profile_id.as_deref())?;
        let params = self.data_residency.unwrap_or_default();
        let defaults = DataResidency::default();
        let data_residency = DataResidency {
            workspace_geo: params.workspace_geo.unwrap_or(defaults.workspace_geo),
            allowed_inference_geos: params.allowed_inference_geos.unwrap_or(defaults.allowed_inference_geos),
            default_inference_geo: params.default_inference_geo.unwrap_or(defaults.default_inference_geo),
        };
        validate_data_residency(&data_residency)?;
        Ok(NewWorkspace { name: self.name, display_color, tags, data_residency })
    }
}

/// `data_residency` of an update body: `workspace_geo` is immutable, the rest optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DataResidencyUpdate {
    /// Accepted only when it repeats the current value: a workspace never moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_geo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_inference_geos: Option<AllowedInferenceGeos>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_inference_geo: Option<String>,
}

/// Body of `POST /v1/organizations/workspaces/{id}`: what is given changes, the rest stays.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_color: Option<String>,
    /// A patch: a string upserts the tag, `null` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_residency: Option<DataResidencyUpdate>,
    /// Absent = keep, `null` = fine (there is none), a value = refused (no CMEK).
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    pub external_key_id: Option<Option<String>>,
    /// Absent = keep, `null` = fine (there is none), a value = refused (no user profiles).
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    pub user_profile_id: Option<Option<String>>,
}

impl WorkspaceUpdate {
    /// Whether the body renames the workspace (the Default workspace refuses that).
    pub fn renames(&self, current: &Workspace) -> bool {
        self.name.as_ref().is_some_and(|n| *n != current.name)
    }

    /// `current` with the body applied, every field checked (spec §8.5). The rules that need
    /// more than the workspace (Default, archived) are `mnemo_store::rules::workspace`'s.
    pub fn apply(&self, current: &Workspace) -> Result<Workspace, Invalid> {
        let mut next = current.clone();
        if let Some(name) = &self.name {
            validate_admin_name(name)?;
            next.name = name.clone();
        }
        if let Some(color) = &self.display_color {
            validate_display_color(color)?;
            next.display_color = color.clone();
        }
        if let Some(patch) = &self.tags {
            for (key, value) in patch {
                match value {
                    Some(v) => {
                        validate_tag(key, v)?;
                        next.tags.insert(key.clone(), v.clone());
                    }
                    None => {
                        next.tags.remove(key);
                    }
                }
            }
            validate_tags(&next.tags)?;
        }
        if let Some(dr) = &self.data_residency {
            if let Some(geo) = &dr.workspace_geo
                && *geo != current.data_residency.workspace_geo
            {
                return Err(Invalid(format!(
                    "data_residency.workspace_geo cannot be changed (the workspace is in `{}`)",
                    current.data_residency.workspace_geo
                )));
            }
            if let Some(allowed) = &dr.allowed_inference_geos {
                next.data_residency.allowed_inference_geos = allowed.clone();
            }
            if let Some(default) = &dr.default_inference_geo {
                next.data_residency.default_inference_geo = default.clone();
            }
            validate_data_residency(&next.data_residency)?;
        }
        if let Some(value) = &self.external_key_id {
            refuse_write_once("external_key_id", value.as_deref())?;
        }
        if let Some(value) = &self.user_profile_id {
            refuse_write_once("user_profile_id", value.as_deref())?;
        }
        Ok(next)
    }
}

/// Checks a workspace or API key name: 1–255 characters, no control characters. Not unique.
pub fn validate_admin_name(name: &str) -> Result<(), Invalid> {
    let n = name.chars().count();
    if n == 0 || n > MAX_ADMIN_NAME_CHARS {
        return Err(Invalid(format!("name must be 1 to {MAX_ADMIN_NAME_CHARS} characters long (got {n})")));
    }
    if name.chars().any(char::is_control) {
        return Err(Invalid("name must not contain control characters".into()));
    }
    Ok(())
}

/// Checks a display colour: `#RRGGBB`.
pub fn validate_display_color(color: &str) -> Result<(), Invalid> {
    let ok = color.len() == 7 && color.starts_with('#') && color.bytes().skip(1).all(|b| b.is_ascii_hexdigit());
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "display_color must be a hex colour `#RRGGBB` (got `{}`)",
            color.chars().take(40).collect::<String>()
        )))
    }
}

/// Checks one tag: key 1–64 characters not starting with `anthropic`, value at most 512.
pub fn validate_tag(key: &str, value: &str) -> Result<(), Invalid> {
    crate::types::validate_pair("tag", key, value, MAX_TAG_KEY_CHARS, MAX_TAG_VALUE_CHARS)?;
    if key.to_ascii_lowercase().starts_with(RESERVED_TAG_PREFIX) {
        return Err(Invalid(format!("tag key `{key}` must not start with `{RESERVED_TAG_PREFIX}`")));
    }
    Ok(())
}

/// Checks a whole tag map: at most 16 valid pairs.
pub fn validate_tags(tags: &BTreeMap<String, String>) -> Result<(), Invalid> {
    if tags.len() > MAX_WORKSPACE_TAGS {
        return Err(Invalid(format!("tags may hold at most {MAX_WORKSPACE_TAGS} pairs (got {})", tags.len())));
    }
    tags.iter().try_for_each(|(k, v)| validate_tag(k, v))
}

fn validate_data_residency(dr: &DataResidency) -> Result<(), Invalid> {
    let geo_ok = |g: &str| !g.is_empty() && g.len() <= 64 && g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let mut fields =
        vec![("workspace_geo", dr.workspace_geo.as_str()), ("default_inference_geo", &dr.default_inference_geo)];
    if let AllowedInferenceGeos::Only(geos) = &dr.allowed_inference_geos {
        fields.extend(geos.iter().map(|g| ("allowed_inference_geos", g.as_str())));
    }
    match fields.into_iter().find(|(_, g)| !geo_ok(g)) {
        Some((field, g)) => Err(Invalid(format!(
            "data_residency.{field} must name a geography such as `us` or `global` (got `{}`)",
            g.chars().take(40).collect::<String>()
        ))),
        None => Ok(()),
    }
}

/// mnemo has no CMEK and no user profiles: a value for either field is refused, `null` is fine.
fn refuse_write_once(field: &str, value: Option<&str>) -> Result<(), Invalid> {
    match value {
        None => Ok(()),
        Some(_) => Err(Invalid(format!(
            "{field} is not supported by this server (no {}); omit it or send null",
            if field == "external_key_id" { "customer-managed keys" } else { "user profiles" }
        ))),
    }
}

/// Query of `GET /v1/organizations/workspaces` beyond the page parameters (`ids[]` is read by
/// the server's query parser, at most [`MAX_WORKSPACE_IDS_FILTER`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceListQuery {
    #[serde(default)]
    pub include_archived: bool,
    #[serde(default)]
    pub include_default: bool,
}

// ---------------------------------------------------------------------------------------------
// API keys

/// The status of an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApiKeyStatus {
    Active,
    Inactive,
    Archived,
    /// Set by the server at `expires_at`; never by a caller.
    Expired,
}

impl ApiKeyStatus {
    /// Every status.
    pub const ALL: [Self; 4] = [Self::Active, Self::Inactive, Self::Archived, Self::Expired];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Inactive => "inactive",
            Self::Archived => "archived",
            Self::Expired => "expired",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for ApiKeyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an API key reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApiKeyScope {
    /// One workspace, the Default one included.
    Workspace { workspace_id: WorkspaceId },
    /// Principal-bound keys without a workspace (the SDK knows it; mnemo mints none).
    Organization,
}

/// Whom a key acts as; `null` on the wire when it is not bound to one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApiKeyPrincipal {
    UserActor { user_id: String },
    ServiceAccountActor { service_account_id: String },
}

/// The kind of creator of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CreatorType {
    User,
    ServiceAccount,
}

/// Who created a key; `null` on the wire for legacy, federated and admin-key-made keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyCreator {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: CreatorType,
}

/// An API key (`type: "api_key"`); never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "api_key")]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: String,
    pub status: ApiKeyStatus,
    pub scope: ApiKeyScope,
    pub principal: Option<ApiKeyPrincipal>,
    pub created_by: Option<ApiKeyCreator>,
    pub created_at: DateTime<Utc>,
    /// Null: never expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// The first 12 characters of the secret, `…`, the last 4.
    pub partial_key_hint: Option<String>,
    /// What older clients read: null for Default-workspace keys, the workspace id otherwise.
    pub workspace_id: Option<WorkspaceId>,
}

/// The answer to `POST /v1/organizations/api_keys` (extension): the key and, this once, its
/// secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyCreated {
    #[serde(flatten)]
    pub api_key: ApiKey,
    #[schema(value_type = String)]
    pub key: Secret,
}

/// Body of `POST /v1/organizations/api_keys` (extension, spec §8.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NewApiKey {
    pub name: String,
    /// An active workspace (the store checks that it is one).
    pub workspace_id: WorkspaceId,
    /// Null or absent: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl NewApiKey {
    /// Checks the body at `now`: the name, and an expiry in the future.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<(), Invalid> {
        validate_admin_name(&self.name)?;
        if let Some(at) = self.expires_at
            && at <= now
        {
            return Err(Invalid(format!(
                "expires_at must be in the future (got {}, it is now {})",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )));
        }
        Ok(())
    }
}

/// Body of `POST /v1/organizations/api_keys/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `active`, `inactive` or `archived`; `expired` is the server's to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ApiKeyStatus>,
}

impl ApiKeyUpdate {
    /// Checks the body alone; the transition itself is `mnemo_store::rules::api_key`'s.
    pub fn validate(&self) -> Result<(), Invalid> {
        if let Some(name) = &self.name {
            validate_admin_name(name)?;
        }
        if self.status == Some(ApiKeyStatus::Expired) {
            return Err(Invalid(
                "status must be one of `active`, `inactive` or `archived`; a key becomes `expired` by itself at its expires_at".into(),
            ));
        }
        Ok(())
    }
}

/// Query of `GET /v1/organizations/api_keys` beyond the page parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ApiKeyStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<WorkspaceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by_user_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Pages

/// A `PageCursor` page of the Admin API (`{data, next_page}`, spec §2): rate limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CursorPage<T> {
    pub data: Vec<T>,
    /// Pass back as `page` for the next page; null on the last.
    pub next_page: Option<String>,
}

/// One page of an Admin API list (the SDK's `Page`, spec §2): unlike the Managed Agents
/// [`crate::Page`], it is walked by the ids at its ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminPage<T> {
    pub data: Vec<T>,
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

impl<T> AdminPage<T> {
    /// A page of `data` (already in list order), its end ids read with `id`.
    pub fn new(data: Vec<T>, has_more: bool, id: impl Fn(&T) -> String) -> Self {
        let first_id = data.first().map(&id);
        let last_id = data.last().map(&id);
        Self { data, has_more, first_id, last_id }
    }
}

/// The page parameters of an Admin API list, as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AdminPageParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_id: Option<String>,
}

/// Which way an Admin API page is read from its cursor id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCursor {
    /// From the start of the list.
    Start,
    /// The items after this id.
    After(String),
    /// The items before this id (the page still lists in list order).
    Before(String),
}

/// Checked page parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminPageQuery {
    pub limit: u32,
    pub cursor: AdminCursor,
}

impl AdminPageParams {
    /// Checks the parameters: `limit` 1–1000 (default 20), at most one of `after_id` and
    /// `before_id`.
    pub fn resolve(&self) -> Result<AdminPageQuery, Invalid> {
        let limit = self.limit.unwrap_or(DEFAULT_ADMIN_PAGE_LIMIT);
        if !(1..=MAX_ADMIN_PAGE_LIMIT).contains(&limit) {
            return Err(Invalid(format!("limit must be between 1 and {MAX_ADMIN_PAGE_LIMIT} (got {limit})")));
        }
        let cursor = match (&self.after_id, &self.before_id) {
            (Some(_), Some(_)) => return Err(Invalid("pass at most one of after_id and before_id".into())),
            (Some(a), None) => AdminCursor::After(a.clone()),
            (None, Some(b)) => AdminCursor::Before(b.clone()),
            (None, None) => AdminCursor::Start,
        };
        Ok(AdminPageQuery { limit, cursor })
    }
}

// ---------------------------------------------------------------------------------------------
// Rate limits

/// Defines a string enum with known wire names and a fallback that keeps any other string, so
/// a value from a newer server (or the hosted one) parses (spec §4.4).
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A name this build does not know, kept as sent.
            Other(String),
        }

        impl $name {
            /// Every name this build knows.
            pub const KNOWN: &'static [Self] = &[$(Self::$variant,)+];

            /// The wire name.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $wire,)+
                    Self::Other(s) => s,
                }
            }

            /// Reads a wire name; an unknown one becomes [`Self::Other`].
            pub fn parse(s: &str) -> Self {
                match s {
                    $($wire => Self::$variant,)+
                    other => Self::Other(other.to_owned()),
                }
            }

            /// Whether this build knows the name.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(Self::parse(&String::deserialize(d)?))
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
                let known: Vec<&str> = vec![$($wire,)+];
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::String))
                    .description(Some(format!("One of {}, or a name a newer server added.", known.join(", "))))
                    .examples(known)
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

open_enum!(
    /// The kind of a rate-limit group.
    RateLimitGroupType {
        ModelGroup => "model_group",
        Batch => "batch",
        Files => "files",
        Skills => "skills",
        TokenCount => "token_count",
        WebSearch => "web_search",
        /// mnemo's group of every Managed Agents endpoint (extension, spec §8.9).
        ManagedAgents => "managed_agents",
    }
);

open_enum!(
    /// What a limiter counts (spec §4.4).
    LimiterType {
        RequestsPerMinute => "requests_per_minute",
        TokensPerMinute => "tokens_per_minute",
        InputTokensPerMinute => "input_tokens_per_minute",
        InputTokensPerMinuteCacheAware => "input_tokens_per_minute_cache_aware",
        OutputTokensPerMinute => "output_tokens_per_minute",
        TokensPerDay => "tokens_per_day",
        ToolUsesPerSecond => "tool_uses_per_second",
        FastItpmca => "fast_itpmca",
        FastOtpm => "fast_otpm",
    }
);

/// The group a rate-limit entry limits; the same id in every organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RateLimitGroup {
    #[serde(rename = "type")]
    pub kind: RateLimitGroupType,
    /// `rlg_…`.
    pub id: String,
    /// Only on model groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// One limiter of an organization entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RateLimitValue {
    #[serde(rename = "type")]
    pub kind: LimiterType,
    pub value: u64,
}

/// An organization-wide rate-limit entry (`type: "rate_limit"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "rate_limit")]
pub struct RateLimit {
    /// Stable within the organization: the `rate_limit_id` of workspace overrides.
    pub id: String,
    pub group: RateLimitGroup,
    pub limits: Vec<RateLimitValue>,
    /// The models of a model group; null for other groups.
    pub models: Option<Vec<String>>,
}

/// Where the value of a workspace limiter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LimitSource {
    Workspace,
    Organization,
}

/// One limiter of a workspace entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceLimitValue {
    #[serde(rename = "type")]
    pub kind: LimiterType,
    /// The workspace's value, or the inherited organization value; null: no limit.
    pub value: Option<u64>,
    /// The organization's value; null: none configured.
    pub org_limit: Option<u64>,
    pub source: LimitSource,
}

/// A workspace's view of a rate-limit entry (`type: "workspace_rate_limit"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "workspace_rate_limit")]
pub struct WorkspaceRateLimit {
    pub rate_limit_id: String,
    pub workspace_id: WorkspaceId,
    pub group: RateLimitGroup,
    pub models: Option<Vec<String>>,
    pub limits: Vec<WorkspaceLimitValue>,
}

/// One change of a workspace override: a value sets it, `null` clears it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LimitChange {
    #[serde(rename = "type")]
    pub kind: LimiterType,
    pub value: Option<u64>,
}

/// Body of `POST …/workspaces/{id}/rate_limits/{rate_limit_id}`: limiters not named stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RateLimitUpdate {
    pub limits: Vec<LimitChange>,
}

impl RateLimitUpdate {
    /// Checks the body alone: at least one change, known limiter types, each at most once,
    /// values positive. Whether the entry has those limiters is the store's rule.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.limits.is_empty() {
            return Err(Invalid("limits must name at least one limiter".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for change in &self.limits {
            if !change.kind.is_known() {
                let known: Vec<&str> = LimiterType::KNOWN.iter().map(LimiterType::as_str).collect();
                return Err(Invalid(format!(
                    "unknown limiter type `{}` (known: {})",
                    change.kind.as_str().chars().take(64).collect::<String>(),
                    known.join(", ")
                )));
            }
            if !seen.insert(change.kind.clone()) {
                return Err(Invalid(format!("limiter type `{}` is named more than once", change.kind)));
            }
            if change.value == Some(0) {
                return Err(Invalid(format!(
                    "the value of `{}` must be a positive integer, or null to clear the override",
                    change.kind
                )));
            }
        }
        Ok(())
    }
}

/// Query of `GET /v1/organizations/rate_limits` (a `PageCursor` list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RateLimitListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_type: Option<RateLimitGroupType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
}

/// Query of `GET …/workspaces/{id}/rate_limits` (a `PageCursor` list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceRateLimitListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_type: Option<RateLimitGroupType>,
    /// False: only the limiters the workspace overrides.
    #[serde(default)]
    pub include_inherited: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Audit log (extension)

/// The kind of credential or agent that did an audited thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditActorType {
    AdminKey,
    ApiKey,
    EnvironmentKey,
    /// A sessions token (the agent loop or a worker acting for a session).
    Session,
    /// A person signed in to the console.
    User,
    /// The server itself (expiry, retention, migration, bootstrap).
    System,
}

impl AuditActorType {
    /// Every actor type.
    pub const ALL: [Self; 6] =
        [Self::AdminKey, Self::ApiKey, Self::EnvironmentKey, Self::Session, Self::User, Self::System];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AdminKey => "admin_key",
            Self::ApiKey => "api_key",
            Self::EnvironmentKey => "environment_key",
            Self::Session => "session",
            Self::User => "user",
            Self::System => "system",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// Who did an audited thing: the id of the key, person or session (`system` for the server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditActor {
    #[serde(rename = "type")]
    pub kind: AuditActorType,
    pub id: String,
}

/// What an audited action acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditResource {
    /// `workspace`, `api_key`, `memory_store`, … (the object's `type`).
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// How an audited action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    Success,
    Failure,
}

impl AuditOutcome {
    /// The wire name (and the stored one).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
        }
    }
}

/// One entry of the audit log (`type: "audit_event"`, extension): never a secret or memory
/// content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "audit_event")]
pub struct AuditEvent {
    pub id: AuditEventId,
    pub created_at: DateTime<Utc>,
    /// Null for organization-level actions (workspace creation, admin keys, sign-in).
    pub workspace_id: Option<WorkspaceId>,
    pub actor: AuditActor,
    /// The dotted action name (`workspace.create`, `api_key.update`, `sign_in.failed`, …); a
    /// free string on the wire so an older client reads a newer server's actions.
    pub action: String,
    /// Null for actions on no object (sign-in).
    pub resource: Option<AuditResource>,
    /// The client's address as the server saw it; null for the server's own actions.
    pub client_ip: Option<String>,
    pub outcome: AuditOutcome,
    /// A small object of action-specific facts (a status change, the fields renamed).
    #[serde(default)]
    pub details: Value,
}

/// Query of `GET /v1/organizations/audit_events` beyond the page parameters: every filter
/// given must match; times are inclusive start, exclusive end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEventListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<WorkspaceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_type: Option<AuditActorType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ending_at: Option<DateTime<Utc>>,
}

impl AuditEventListQuery {
    /// Checks the filters: a time window that is not empty.
    pub fn validate(&self) -> Result<(), Invalid> {
        if let (Some(start), Some(end)) = (self.starting_at, self.ending_at)
            && start >= end
        {
            return Err(Invalid("starting_at must be before ending_at".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
