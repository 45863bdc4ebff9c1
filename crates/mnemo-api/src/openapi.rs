//! What the OpenAPI document needs from the wire types beyond their derived schemas.
//!
//! The schemas themselves are derived (`utoipa::ToSchema`) from the same types serde reads and
//! writes. Two things the derive cannot see are filled in here: the prefixed ids (hand-written
//! serde) and the `type` field of objects serde tags with `#[serde(tag = "type", rename = …)]`.

use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa::{PartialSchema, ToSchema};

/// The schema of a prefixed id: a string of `prefix` and up to 64 ASCII letters and digits.
pub(crate) fn id_schema(prefix: &str, kind: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .pattern(Some(format!("^{prefix}[0-9A-Za-z]{{1,64}}$")))
        .description(Some(format!("A {kind} id (`{prefix}…`).")))
        .examples([format!("{prefix}011CZkZaBF1tNoB5wlCeusgy")])
        .into()
}

/// Objects whose `type` field serde writes from a container attribute: (schema name, value).
///
/// `tests::every_tagged_struct_is_listed` reads this crate's sources so a new tagged struct
/// cannot be forgotten here.
pub const TYPE_TAGS: &[(&str, &str)] = &[
    ("Agent", "agent"),
    ("Environment", "environment"),
    ("EnvironmentDeleted", "environment_deleted"),
    ("EnvironmentKey", "environment_key"),
    ("Work", "work"),
    ("WorkHeartbeat", "work_heartbeat"),
    ("WorkQueueStats", "work_queue_stats"),
    ("ErrorEnvelope", "error"),
    ("MemoryStoreResource", "memory_store"),
    ("Session", "session"),
    ("SessionDeleted", "session_deleted"),
    ("MemoryStore", "memory_store"),
    ("Memory", "memory"),
    ("MemoryPrefix", "memory_prefix"),
    ("MemoryStreamEnd", "memory_stream_end"),
    ("MemorySearchResult", "memory_search_result"),
    ("VersionRetention", "memory_store_version_retention"),
    ("MemoryWriteResults", "memory_write_results"),
    ("MemoryVersion", "memory_version"),
    ("MemoryDeleted", "memory_deleted"),
    ("MemoryStoreDeleted", "memory_store_deleted"),
    ("WebhookEndpoint", "webhook_endpoint"),
    ("WebhookEndpointDeleted", "webhook_endpoint_deleted"),
    ("WebhookDelivery", "webhook_delivery"),
    ("WebhookEvent", "event"),
    ("Organization", "organization"),
    ("Workspace", "workspace"),
    ("ApiKey", "api_key"),
    ("RateLimit", "rate_limit"),
    ("WorkspaceRateLimit", "workspace_rate_limit"),
    ("AuditEvent", "audit_event"),
    ("User", "user"),
    ("Invite", "invite"),
    ("WorkspaceMember", "workspace_member"),
    ("UserDeleted", "user_deleted"),
    ("InviteDeleted", "invite_deleted"),
    ("WorkspaceMemberDeleted", "workspace_member_deleted"),
];

/// Completes a document that uses these types: the `type` constants of [`TYPE_TAGS`], and the
/// two tool-result events, whose call id is named by the event's type (`tool_use_id` or
/// `custom_tool_use_id`) where the derived schema of their shared [`crate::ToolResult`] has none.
pub fn complete(doc: &mut OpenApi) {
    refer_page_items(doc);
    add_type_tags(doc, TYPE_TAGS);
    let Some(components) = doc.components.as_mut() else { return };
    if !components.schemas.contains_key("Event") {
        return;
    }
    let mut extra = Vec::new();
    for (name, schema) in [
        (crate::events::BuiltInToolResult::name(), crate::events::BuiltInToolResult::schema()),
        (crate::events::CustomToolResult::name(), crate::events::CustomToolResult::schema()),
    ] {
        extra.push((name.into_owned(), schema));
    }
    components.schemas.extend(extra);
    let Some(RefOr::T(Schema::OneOf(event))) = components.schemas.get_mut("Event") else {
        panic!("the Event schema is a oneOf of its variants");
    };
    let tag_of = |variant: &RefOr<Schema>| {
        let RefOr::T(Schema::AllOf(all)) = variant else { return None };
        all.items.iter().find_map(|part| match part {
            RefOr::T(Schema::Object(o)) => match o.properties.get("type") {
                Some(RefOr::T(Schema::Object(t))) => t.enum_values.as_ref()?.first()?.as_str().map(str::to_owned),
                _ => None,
            },
            _ => None,
        })
    };
    // `Event::Unknown` holds what a newer build logged: no request or response of this build
    // has that shape to describe (the derive would call it a type named `Unknown`).
    event.items.retain(|variant| tag_of(variant).as_deref() != Some("Unknown"));
    let mut patched = 0;
    for variant in &mut event.items {
        let tag = tag_of(variant);
        let RefOr::T(Schema::AllOf(all)) = variant else { continue };
        let target = match tag.as_deref() {
            Some("user.tool_result") => "BuiltInToolResult",
            Some("user.custom_tool_result") => "CustomToolResult",
            _ => continue,
        };
        for part in &mut all.items {
            if let RefOr::Ref(r) = part {
                *r = utoipa::openapi::Ref::from_schema_name(target);
                patched += 1;
            }
        }
    }
    assert_eq!(patched, 2, "both tool-result events name their call id");
    components.schemas.remove("UnknownEvent");
}

/// Points the `data` items of every `Page_X` and `AdminPage_X` at the component `X`: the derive
/// inlines a generic argument, and an inlined copy would miss what is added to `X` afterwards.
fn refer_page_items(doc: &mut OpenApi) {
    use utoipa::openapi::schema::ArrayItems;
    let Some(components) = doc.components.as_mut() else { return };
    let pages: Vec<(String, String)> = components
        .schemas
        .keys()
        .filter_map(|name| {
            let item = ["Page_", "AdminPage_", "CursorPage_"].iter().find_map(|p| name.strip_prefix(p))?;
            Some((name.clone(), item.to_owned()))
        })
        .filter(|(_, item)| components.schemas.contains_key(item))
        .collect();
    for (page, item) in pages {
        let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(&page) else { continue };
        if let Some(RefOr::T(Schema::Array(data))) = object.properties.get_mut("data") {
            data.items = ArrayItems::RefOrSchema(Box::new(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(item))));
        }
    }
}

/// Adds the required `type` property (a constant) to every schema of `tags` in `doc`.
///
/// Panics if a listed schema is not an object: the document would lie.
pub fn add_type_tags(doc: &mut OpenApi, tags: &[(&str, &str)]) {
    let Some(components) = doc.components.as_mut() else { return };
    for (name, tag) in tags {
        // A flattened struct is an `allOf` whose own fields are its object part.
        let object = match components.schemas.get_mut(*name) {
            Some(RefOr::T(Schema::Object(object))) => object,
            Some(RefOr::T(Schema::AllOf(all))) => match all.items.iter_mut().find_map(|part| match part {
                RefOr::T(Schema::Object(object)) => Some(object),
                _ => None,
            }) {
                Some(object) => object,
                None => panic!("{name}: an allOf without an object part"),
            },
            // A type the API does not use is simply absent from the document.
            None => continue,
            Some(_) => panic!("{name}: a tagged struct whose schema is not an object"),
        };
        let constant =
            ObjectBuilder::new().schema_type(SchemaType::Type(Type::String)).enum_values(Some([*tag])).build();
        object.properties.insert("type".to_owned(), constant.into());
        if !object.required.iter().any(|r| r == "type") {
            object.required.insert(0, "type".to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `#[serde(tag = "type", rename = "x")]` directly above a `pub struct Name` in this
    /// crate's sources, as `(Name, x)`.
    pub(crate) fn tagged_structs(sources: &[&str]) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for source in sources {
            let lines: Vec<&str> = source.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(rest) = line.trim().strip_prefix("#[serde(tag = \"type\", rename = \"") else { continue };
                let tag = rest.split('"').next().unwrap_or_default();
                let name = lines[i + 1..]
                    .iter()
                    .find_map(|l| l.trim().strip_prefix("pub struct "))
                    .and_then(|l| l.split([' ', '{', '<']).next())
                    .unwrap_or_default();
                found.push((name.to_owned(), tag.to_owned()));
            }
        }
        found
    }

    #[test]
    fn every_tagged_struct_is_listed() {
        let sources = [
            include_str!("admin.rs"),
            include_str!("agents.rs"),
            include_str!("environments.rs"),
            include_str!("error.rs"),
            include_str!("sessions.rs"),
            include_str!("types.rs"),
            include_str!("events.rs"),
            include_str!("webhooks.rs"),
            include_str!("people.rs"),
        ];
        let mut found = tagged_structs(&sources);
        found.sort();
        let mut listed: Vec<(String, String)> =
            TYPE_TAGS.iter().map(|(n, t)| ((*n).to_owned(), (*t).to_owned())).collect();
        listed.sort();
        assert_eq!(found, listed);
    }

    #[test]
    fn admin_pages_refer_to_their_tagged_items() {
        use utoipa::OpenApi as _;
        #[derive(utoipa::OpenApi)]
        #[openapi(components(schemas(
            crate::Workspace,
            crate::AdminPage<crate::Workspace>,
            crate::ApiKeyCreated,
            crate::RateLimit,
            crate::CursorPage<crate::RateLimit>
        )))]
        struct Doc;
        let mut doc = Doc::openapi();
        complete(&mut doc);
        let json = serde_json::to_value(&doc).unwrap();
        let schemas = &json["components"]["schemas"];
        assert_eq!(
            schemas["AdminPage_Workspace"]["properties"]["data"]["items"]["$ref"],
            "#/components/schemas/Workspace"
        );
        assert_eq!(schemas["Workspace"]["properties"]["type"]["enum"], serde_json::json!(["workspace"]));
        assert_eq!(schemas["Workspace"]["properties"]["id"]["$ref"], "#/components/schemas/WorkspaceId");
        // A `PageCursor` page too: its items carry their `type` constant.
        assert_eq!(
            schemas["CursorPage_RateLimit"]["properties"]["data"]["items"]["$ref"],
            "#/components/schemas/RateLimit"
        );
    }

    #[test]
    fn tags_become_a_required_constant() {
        use utoipa::OpenApi as _;
        #[derive(utoipa::OpenApi)]
        #[openapi(components(schemas(crate::MemoryDeleted)))]
        struct Doc;
        let mut doc = Doc::openapi();
        add_type_tags(&mut doc, TYPE_TAGS);
        let json = serde_json::to_value(&doc).unwrap();
        let schema = &json["components"]["schemas"]["MemoryDeleted"];
        assert_eq!(schema["properties"]["type"]["enum"], serde_json::json!(["memory_deleted"]));
        assert_eq!(schema["required"][0], "type");
        assert_eq!(schema["properties"]["id"]["$ref"], "#/components/schemas/MemoryId");
    }
}
