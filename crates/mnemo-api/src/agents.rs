//! Agents: the versioned configuration a session runs — its model, system prompt and tools, as
//! the reference client expects them. `mnemo serve --models` runs the agents whose model its
//! providers file maps; the others are driven from outside.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::ids::AgentId;
use crate::types::{Invalid, validate_metadata, validate_store_name};

/// The versioned part of an agent, normalised (defaults filled in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AgentSpec {
    pub name: String,
    pub description: Option<String>,
    pub system: Option<String>,
    /// `{id, effort, inference_geo, speed}`.
    pub model: Value,
    pub tools: Vec<Value>,
    pub mcp_servers: Vec<Value>,
    pub skills: Vec<Value>,
    pub execution_identity: Value,
    pub multiagent: Option<Value>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// An agent as the API returns it (`type: "agent"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "agent")]
pub struct Agent {
    pub id: AgentId,
    pub version: u32,
    #[serde(flatten)]
    pub spec: AgentSpec,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub archived_at: Option<DateTime<Utc>>,
}

/// Body of `POST /v1/agents` (and, with `version`, of an update).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AgentParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Option<Vec<Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Option<Vec<Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Option<Vec<Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_identity: Option<Option<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiagent: Option<Option<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, Option<String>>>,
    /// On update: the version the change is based on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
}

/// Fills the defaults of a model given as a bare id or an object.
pub fn normalize_model(model: &Value) -> Result<Value, Invalid> {
    let mut out = match model {
        Value::String(id) if !id.is_empty() => json!({"id": id}),
        Value::Object(m) if m.get("id").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) => {
            Value::Object(m.clone())
        }
        _ => return Err(Invalid("model must be a model id or an object with an `id`".into())),
    };
    for key in ["effort", "inference_geo", "speed"] {
        out.as_object_mut().expect("an object").entry(key).or_insert(Value::Null);
    }
    Ok(out)
}

/// Longest agent system prompt, in characters (the SDK's documented figure).
pub const MAX_AGENT_SYSTEM_CHARS: usize = 100_000;
/// Most entries in an agent's `tools` (the SDK: "Maximum of 256 tools across all toolsets").
pub const MAX_AGENT_TOOLS: usize = 256;
/// Most MCP servers on an agent.
pub const MAX_AGENT_MCP_SERVERS: usize = 20;

/// Fills the defaults of a tool definition (the agent toolset's `default_config` and `configs`).
pub fn normalize_tool(tool: &Value) -> Result<Value, Invalid> {
    let kind = tool.get("type").and_then(Value::as_str).ok_or_else(|| Invalid("every tool needs a `type`".into()))?;
    let mut out = tool.clone();
    let obj = out.as_object_mut().ok_or_else(|| Invalid("a tool must be an object".into()))?;
    match kind {
        "agent_toolset_20260401" | "mcp_toolset" => {
            let default = obj.entry("default_config").or_insert_with(|| json!({}));
            if let Some(d) = default.as_object_mut() {
                d.entry("enabled").or_insert(Value::Bool(true));
                d.entry("permission_policy").or_insert_with(|| json!({"type": "always_allow"}));
            }
            obj.entry("configs").or_insert_with(|| json!([]));
        }
        "custom" => {
            if obj.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(Invalid("a custom tool needs a `name`".into()));
            }
        }
        other => return Err(Invalid(format!("unknown tool type `{other}`"))),
    }
    Ok(out)
}

/// The `type` of the built-in toolset an agent's `tools` may hold.
pub const AGENT_TOOLSET_TYPE: &str = "agent_toolset_20260401";

/// How a built-in tool call is let through (`permission_policy.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionPolicy {
    AlwaysAllow,
    AlwaysAsk,
}

impl PermissionPolicy {
    /// What the policy gives a call.
    pub fn permission(self) -> crate::events::Permission {
        match self {
            Self::AlwaysAllow => crate::events::Permission::Allow,
            Self::AlwaysAsk => crate::events::Permission::Ask,
        }
    }

    /// The policy as an `agent.tool_use` event's `evaluation` shows it.
    pub fn to_json(self) -> Value {
        match self {
            Self::AlwaysAllow => json!({"type": "always_allow"}),
            Self::AlwaysAsk => json!({"type": "always_ask"}),
        }
    }
}

/// A built-in tool's configuration (the toolset's `default_config`, or one of its `configs`);
/// `None`: not said here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolConfig {
    pub enabled: Option<bool>,
    pub policy: Option<PermissionPolicy>,
}

impl ToolConfig {
    fn of(config: &Value) -> Self {
        let policy = &config["permission_policy"];
        Self {
            enabled: config["enabled"].as_bool(),
            // Any stated policy but `always_ask` lets calls through, as it always has.
            policy: (!policy.is_null()).then(|| match policy["type"].as_str() {
                Some("always_ask") => PermissionPolicy::AlwaysAsk,
                _ => PermissionPolicy::AlwaysAllow,
            }),
        }
    }
}

/// A custom tool of an agent: the client answers its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomTool {
    pub name: String,
    pub description: String,
    /// Its `input_schema` when that is an object.
    pub input_schema: Option<Map<String, Value>>,
}

/// An agent's `tools` read once: the built-in toolset's configuration (with the permission of
/// each tool) and the custom tools. The session state machine (which permission an
/// `agent.tool_use` gets), the agent loop (which tools the model is offered, which calls are
/// custom) ask this one reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Toolset {
    /// `None`: the agent has no built-in toolset (every built-in call is denied).
    built_in: Option<BuiltInToolset>,
    custom: Vec<CustomTool>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct BuiltInToolset {
    default: ToolConfig,
    /// Each entry's `name` (or `type`) and its configuration, in order.
    configs: Vec<(Option<String>, Option<String>, ToolConfig)>,
}

impl Toolset {
    /// The toolset of an agent as a session holds it (`{…, "tools": [...]}`); entries of other
    /// types (MCP toolsets) are not this toolset's business.
    pub fn of_agent(agent: &Value) -> Self {
        Self::of(agent["tools"].as_array().map(Vec::as_slice).unwrap_or_default())
    }

    /// The toolset of an agent's `tools`.
    pub fn of(tools: &[Value]) -> Self {
        let built_in = tools.iter().find(|t| t["type"] == AGENT_TOOLSET_TYPE).map(|t| BuiltInToolset {
            default: ToolConfig::of(&t["default_config"]),
            configs: t["configs"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|c| {
                    let text = |key: &str| c[key].as_str().map(str::to_owned);
                    (text("name"), text("type"), ToolConfig::of(c))
                })
                .collect(),
        });
        let custom = tools
            .iter()
            .filter(|t| t["type"] == "custom")
            .filter_map(|t| {
                Some(CustomTool {
                    name: t["name"].as_str()?.to_owned(),
                    description: t["description"].as_str().unwrap_or_default().to_owned(),
                    input_schema: t["input_schema"].as_object().cloned(),
                })
            })
            .collect();
        Self { built_in, custom }
    }

    /// Whether the agent has the built-in toolset.
    pub fn has_built_in(&self) -> bool {
        self.built_in.is_some()
    }

    /// What the agent's configuration lets a call of built-in tool `tool` do, and the policy
    /// that said so: denied without the toolset or when the tool is disabled (its own config's
    /// `enabled`, else the default's); else its own config's policy, else the default's,
    /// else allowed.
    pub fn permission(&self, tool: &str) -> (crate::events::Permission, Option<PermissionPolicy>) {
        use crate::events::Permission;
        let Some(toolset) = &self.built_in else { return (Permission::Deny, None) };
        let config = toolset
            .configs
            .iter()
            .find(|(name, kind, _)| name.as_deref() == Some(tool) || kind.as_deref() == Some(tool))
            .map(|(_, _, c)| c);
        let enabled = config.and_then(|c| c.enabled).or(toolset.default.enabled);
        if enabled == Some(false) {
            return (Permission::Deny, None);
        }
        let policy = config.and_then(|c| c.policy).or(toolset.default.policy).unwrap_or(PermissionPolicy::AlwaysAllow);
        (policy.permission(), Some(policy))
    }

    /// The agent's custom tools, in order.
    pub fn custom(&self) -> &[CustomTool] {
        &self.custom
    }

    /// Whether the agent defines a custom tool called `name`.
    pub fn is_custom(&self, name: &str) -> bool {
        self.custom.iter().any(|t| t.name == name)
    }
}

/// The documented size limits of an agent: its system prompt, tools and MCP servers.
fn validate_limits(spec: &AgentSpec) -> Result<(), Invalid> {
    if let Some(system) = &spec.system {
        let n = system.chars().count();
        if n > MAX_AGENT_SYSTEM_CHARS {
            return Err(Invalid(format!("system must be at most {MAX_AGENT_SYSTEM_CHARS} characters long (got {n})")));
        }
    }
    if spec.tools.len() > MAX_AGENT_TOOLS {
        return Err(Invalid(format!("an agent has at most {MAX_AGENT_TOOLS} tools (got {})", spec.tools.len())));
    }
    if spec.mcp_servers.len() > MAX_AGENT_MCP_SERVERS {
        return Err(Invalid(format!(
            "an agent has at most {MAX_AGENT_MCP_SERVERS} MCP servers (got {})",
            spec.mcp_servers.len()
        )));
    }
    Ok(())
}

impl AgentSpec {
    /// A new agent's spec from creation parameters.
    pub fn from_params(p: &AgentParams) -> Result<Self, Invalid> {
        let name = p.name.clone().ok_or_else(|| Invalid("name is required".into()))?;
        let model = p.model.as_ref().ok_or_else(|| Invalid("model is required".into()))?;
        let mut spec = Self {
            name,
            description: None,
            system: None,
            model: normalize_model(model)?,
            tools: Vec::new(),
            mcp_servers: Vec::new(),
            skills: Vec::new(),
            execution_identity: json!({"type": "service_account"}),
            multiagent: None,
            metadata: BTreeMap::new(),
        };
        spec.apply(p)?;
        Ok(spec)
    }

    /// Applies an update (or the optional part of a creation) and re-validates.
    pub fn apply(&mut self, p: &AgentParams) -> Result<(), Invalid> {
        if let Some(name) = &p.name {
            self.name.clone_from(name);
        }
        if let Some(model) = &p.model {
            self.model = normalize_model(model)?;
        }
        if let Some(d) = &p.description {
            self.description.clone_from(d);
        }
        if let Some(s) = &p.system {
            self.system.clone_from(s);
        }
        if let Some(tools) = &p.tools {
            self.tools = tools.iter().flatten().map(normalize_tool).collect::<Result<_, _>>()?;
        }
        if let Some(m) = &p.mcp_servers {
            self.mcp_servers = m.clone().unwrap_or_default();
        }
        if let Some(s) = &p.skills {
            self.skills = s.clone().unwrap_or_default();
        }
        if let Some(e) = &p.execution_identity {
            self.execution_identity = e.clone().unwrap_or_else(|| json!({"type": "service_account"}));
        }
        if let Some(m) = &p.multiagent {
            self.multiagent.clone_from(m);
        }
        if let Some(patch) = &p.metadata {
            for (k, v) in patch {
                match v {
                    Some(v) => self.metadata.insert(k.clone(), v.clone()),
                    None => self.metadata.remove(k),
                };
            }
        }
        validate_store_name(&self.name)?;
        validate_limits(self)?;
        validate_metadata(&self.metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_limits_take_their_edge_and_refuse_one_past_it() {
        let custom = |i: usize| json!({"type": "custom", "name": format!("t{i}")});
        let mcp = |i: usize| json!({"type": "url", "name": format!("m{i}"), "url": "https://example.com/mcp"});
        let system = |n: usize| json!({"system": "é".repeat(n)});
        let tools = |n: usize| json!({"tools": (0..n).map(custom).collect::<Vec<_>>()});
        let servers = |n: usize| json!({"mcp_servers": (0..n).map(mcp).collect::<Vec<_>>()});
        for (what, at, past) in [
            ("system", system(MAX_AGENT_SYSTEM_CHARS), system(MAX_AGENT_SYSTEM_CHARS + 1)),
            ("tools", tools(MAX_AGENT_TOOLS), tools(MAX_AGENT_TOOLS + 1)),
            ("mcp_servers", servers(MAX_AGENT_MCP_SERVERS), servers(MAX_AGENT_MCP_SERVERS + 1)),
        ] {
            let params = |extra: &Value| -> AgentParams {
                let mut p = json!({"name": "a", "model": "m"});
                p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
                serde_json::from_value(p).unwrap()
            };
            assert!(AgentSpec::from_params(&params(&at)).is_ok(), "{what} at the limit");
            let err = AgentSpec::from_params(&params(&past)).unwrap_err();
            assert!(err.0.contains("at most"), "{what}: {}", err.0);
            // An update is judged on its result too.
            let mut spec = AgentSpec::from_params(&params(&json!({}))).unwrap();
            assert!(spec.apply(&params(&past)).is_err(), "{what} by update");
        }
    }

    #[test]
    fn creation_fills_defaults() {
        let p: AgentParams = serde_json::from_value(json!({
            "name": "Support", "model": "claude-opus-4-6", "tools": [{"type": "agent_toolset_20260401"}]
        }))
        .unwrap();
        let spec = AgentSpec::from_params(&p).unwrap();
        assert_eq!(spec.model["id"], "claude-opus-4-6");
        assert!(spec.model.get("speed").is_some());
        assert_eq!(spec.tools[0]["default_config"]["permission_policy"]["type"], "always_allow");
        assert_eq!(spec.execution_identity["type"], "service_account");
        assert!(AgentSpec::from_params(&AgentParams { name: Some("x".into()), ..Default::default() }).is_err());
        let bad_tool: AgentParams =
            serde_json::from_value(json!({"name": "a", "model": "m", "tools": [{"type": "laser"}]})).unwrap();
        assert!(AgentSpec::from_params(&bad_tool).is_err());
    }

    /// The permission of each built-in tool call, by the agent's toolset (table).
    #[test]
    fn a_toolset_gives_each_tool_its_permission() {
        use crate::events::Permission::{Allow, Ask, Deny};
        use PermissionPolicy::{AlwaysAllow, AlwaysAsk};
        let ask = json!({"type": "always_ask"});
        let toolset = |default: Value, configs: Value| json!({"tools": [{"type": AGENT_TOOLSET_TYPE, "default_config": default, "configs": configs}]});
        let cases = [
            (json!({"tools": []}), "read", (Deny, None)),
            (json!({"tools": [{"type": "custom", "name": "read"}]}), "read", (Deny, None)),
            (json!({"tools": [{"type": AGENT_TOOLSET_TYPE}]}), "read", (Allow, Some(AlwaysAllow))),
            (toolset(json!({"enabled": false}), json!([])), "read", (Deny, None)),
            (
                toolset(json!({"enabled": false}), json!([{"name": "read", "enabled": true}])),
                "read",
                (Allow, Some(AlwaysAllow)),
            ),
            (toolset(json!({}), json!([{"name": "bash", "enabled": false}])), "bash", (Deny, None)),
            (toolset(json!({}), json!([{"type": "bash", "enabled": false}])), "bash", (Deny, None)),
            (toolset(json!({"permission_policy": ask}), json!([])), "edit", (Ask, Some(AlwaysAsk))),
            (
                toolset(
                    json!({"permission_policy": ask}),
                    json!([{"name": "edit", "permission_policy": {"type": "always_allow"}}]),
                ),
                "edit",
                (Allow, Some(AlwaysAllow)),
            ),
            (toolset(json!({}), json!([{"name": "edit", "permission_policy": ask}])), "edit", (Ask, Some(AlwaysAsk))),
            (
                toolset(json!({}), json!([{"name": "edit", "permission_policy": ask}])),
                "read",
                (Allow, Some(AlwaysAllow)),
            ),
            // A null policy falls back to the default's; an unknown one lets calls through.
            (
                toolset(json!({"permission_policy": ask}), json!([{"name": "edit", "permission_policy": null}])),
                "edit",
                (Ask, Some(AlwaysAsk)),
            ),
            (
                toolset(json!({"permission_policy": {"type": "sometimes"}}), json!([])),
                "edit",
                (Allow, Some(AlwaysAllow)),
            ),
        ];
        for (agent, tool, expected) in cases {
            assert_eq!(Toolset::of_agent(&agent).permission(tool), expected, "{tool} under {agent}");
        }
        assert_eq!(AlwaysAsk.to_json(), ask);
    }

    #[test]
    fn a_toolset_knows_its_custom_tools() {
        let tools = Toolset::of_agent(&json!({"tools": [
            {"type": "custom", "name": "lookup", "description": "d", "input_schema": {"type": "object"}},
            {"type": "custom", "name": "bare", "input_schema": "nonsense"},
            {"type": "custom"},
            {"type": "mcp_toolset", "name": "mcp"},
        ]}));
        assert!(!tools.has_built_in());
        assert!(tools.is_custom("lookup") && tools.is_custom("bare") && !tools.is_custom("mcp"));
        assert_eq!(tools.custom().len(), 2);
        assert_eq!(tools.custom()[0].description, "d");
        assert_eq!(tools.custom()[1].input_schema, None);
    }
}
