//! The OpenAPI 3.1 document, generated from the route annotations of every module and from the
//! domains' wire types.
//!
//! Two generators meet here. utoipa reads the route annotations and the server's own types;
//! the bodies owned by the domains (memory, knowledge, context, core) derive `JsonSchema`
//! (schemars), the same derive that gives the MCP tools their schemas. Each such body is named
//! once, with that type, in its module's `wire_bodies!` ([`crate::bodies`]); its utoipa
//! component (an empty placeholder) becomes a `$ref` to the schema of the type, and every
//! schema that type uses lands in `components/schemas` under its own name. Requests are described as serde deserializes them
//! (a defaulted field is optional), answers as serde serializes them (a skipped field is
//! optional).

use std::sync::LazyLock;

use axum::Json;
use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Harness Registry",
        description = "A governed registry for the memory, knowledge and skills of AI agents."
    ),
    modifiers(&BearerAuth)
)]
struct BaseApi;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let c = doc.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

const COMPONENTS: &str = "/components/schemas";

/// The domain types behind the placeholder components of the route annotations.
pub struct WireBodies {
    requests: SchemaGenerator,
    answers: SchemaGenerator,
    /// The body's component name, its schema, and whether it is an answer.
    named: Vec<(String, Value, bool)>,
}

fn generator(contract: Contract) -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = COMPONENTS.into();
            s.meta_schema = None;
            s.contract = contract;
        })
        .into_generator()
}

impl WireBodies {
    fn new() -> Self {
        WireBodies {
            requests: generator(Contract::Deserialize),
            answers: generator(Contract::Serialize),
            named: Vec::new(),
        }
    }

    /// The body named `name` is a request read as `T`.
    pub fn request<T: JsonSchema>(&mut self, name: impl Into<String>) -> &mut Self {
        let s = self.requests.subschema_for::<T>().to_value();
        self.named.push((name.into(), s, false));
        self
    }

    /// The body named `name` is an answer written from `T`.
    pub fn answer<T: JsonSchema>(&mut self, name: impl Into<String>) -> &mut Self {
        let s = self.answers.subschema_for::<T>().to_value();
        self.named.push((name.into(), s, true));
        self
    }
}

/// Every body whose schema comes from a domain type, as each module declares them.
fn wire_bodies() -> WireBodies {
    use crate::routes::{context, deletion, feed, knowledge, memory, skills, system, tasks};
    let mut w = WireBodies::new();
    crate::bodies::shared::wire_bodies(&mut w);
    system::wire_bodies(&mut w);
    memory::wire_bodies(&mut w);
    knowledge::wire_bodies(&mut w);
    skills::wire_bodies(&mut w);
    deletion::wire_bodies(&mut w);
    feed::wire_bodies(&mut w);
    context::wire_bodies(&mut w);
    tasks::wire_bodies(&mut w);
    w
}

/// Puts the domain schemas into the utoipa document (as JSON). A name the two generators both
/// claim for different schemas is a bug in the wire types and fails the snapshot test.
fn merge_wire_bodies(doc: &mut Value, mut w: WireBodies) {
    let requests = w.requests.take_definitions(true);
    let mut answers = w.answers.take_definitions(true);
    let schemas = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
        .expect("the document has components");
    // Names utoipa produced itself: a domain schema may replace only a placeholder.
    let placeholders: Vec<String> = w.named.iter().map(|(n, _, _)| n.clone()).collect();
    let utoipa_names: Vec<String> = schemas
        .keys()
        .filter(|k| !placeholders.contains(k))
        .cloned()
        .collect();
    // An answer schema that differs from the request schema of the same name is renamed
    // `<Name>Answer`, and the answers' references follow.
    let mut renames = Vec::new();
    for (name, schema) in answers.iter() {
        if requests.get(name).is_some_and(|r| r != schema) {
            renames.push(name.clone());
        }
    }
    for name in &renames {
        let s = answers.remove(name).expect("listed");
        answers.insert(format!("{name}Answer"), s);
    }
    let rename_refs = |v: &mut Value| rewrite_refs(v, &renames);
    let mut answers: Map<String, Value> = answers
        .into_iter()
        .map(|(k, mut v)| {
            rename_refs(&mut v);
            (k, v)
        })
        .collect();
    for (_, s, is_answer) in w.named.iter_mut() {
        if *is_answer {
            rename_refs(s);
        }
    }
    for (name, schema) in requests.into_iter().chain(std::mem::take(&mut answers)) {
        assert!(
            !utoipa_names.contains(&name),
            "schema name {name} is claimed by a route type and a domain type"
        );
        // A placeholder's own schema is replaced; any other earlier claim must agree.
        if let Some(old) = schemas.get(&name).filter(|_| !placeholders.contains(&name)) {
            assert_eq!(old, &schema, "two domain types are both named {name}");
        }
        schemas.insert(name, schema);
    }
    for (name, schema, _) in w.named {
        // A placeholder that is itself the domain type's name already holds its schema.
        let self_ref = format!("#{COMPONENTS}/{name}");
        if schema.get("$ref").and_then(Value::as_str) == Some(self_ref.as_str()) {
            continue;
        }
        schemas.insert(name, schema);
    }
}

fn rewrite_refs(v: &mut Value, renames: &[String]) {
    match v {
        Value::Object(m) => {
            let prefix = format!("#{COMPONENTS}/");
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                let renamed = r
                    .strip_prefix(&prefix)
                    .filter(|name| renames.iter().any(|n| n == name))
                    .map(|name| format!("{prefix}{name}Answer"));
                if let Some(renamed) = renamed {
                    *r = renamed;
                }
            }
            m.values_mut().for_each(|v| rewrite_refs(v, renames));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rewrite_refs(v, renames)),
        _ => {}
    }
}

/// The error answers every operation of a kind can give, whether or not its annotation lists
/// them: a key refused (401), a body that is not JSON (400), too large (413), of another
/// content type (415) or of the wrong shape (422), a parameter of the wrong shape (422), an id
/// that names nothing the caller may see (404). A client reads them all as `ErrorBody`.
fn document_common_errors(doc: &mut Value) {
    let error = |what: &str| {
        serde_json::json!({
            "description": what,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        })
    };
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for item in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in item.values_mut().filter_map(Value::as_object_mut) {
            let secured = op.get("security").is_some();
            let json_body = op
                .get("requestBody")
                .and_then(|b| b.pointer("/content/application~1json"))
                .is_some();
            let params: Vec<String> = op
                .get("parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("in").and_then(Value::as_str).map(String::from))
                .collect();
            let mut add = vec![];
            if secured {
                add.push(("401", "no valid API key"));
            }
            if json_body {
                add.push(("400", "the body is not JSON"));
                add.push(("413", "the body is too large"));
                add.push(("415", "the body is not application/json"));
            }
            if json_body || !params.is_empty() {
                add.push(("422", "a field or parameter of the wrong shape"));
            }
            if params.iter().any(|p| p == "path") {
                add.push(("404", "nothing of that id the caller may see"));
            }
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            for (status, what) in add {
                responses
                    .entry(status.to_string())
                    .or_insert_with(|| error(what));
            }
        }
    }
}

/// The merged document.
pub fn document() -> Value {
    static DOC: LazyLock<Value> = LazyLock::new(|| {
        let mut doc = BaseApi::openapi();
        doc.merge(crate::routes::system::SystemApi::openapi());
        doc.merge(crate::routes::memory::MemoryApi::openapi());
        doc.merge(crate::routes::knowledge::KnowledgeApi::openapi());
        doc.merge(crate::routes::skills::SkillsApi::openapi());
        doc.merge(crate::routes::skill_proof::SkillProofApi::openapi());
        doc.merge(crate::routes::deletion::DeletionApi::openapi());
        doc.merge(crate::routes::feed::FeedApi::openapi());
        doc.merge(crate::routes::context::ContextApi::openapi());
        doc.merge(crate::routes::retrieve::RetrieveApi::openapi());
        doc.merge(crate::routes::tasks::TasksApi::openapi());
        doc.info.version = env!("CARGO_PKG_VERSION").to_string();
        let mut doc = serde_json::to_value(doc).expect("the document serializes");
        merge_wire_bodies(&mut doc, wire_bodies());
        document_common_errors(&mut doc);
        doc
    });
    DOC.clone()
}

pub async fn serve_openapi() -> Json<Value> {
    Json(document())
}
