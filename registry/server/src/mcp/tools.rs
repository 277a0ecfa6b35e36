//! The MCP tools: each one's input and output schema is generated (schemars) from the type
//! serde reads its arguments into and the type its answer is written from, the same types
//! the HTTP routes use, so a tool and its route cannot describe different bodies.

use std::sync::{Arc, LazyLock};

use registry_context::{Pack, PackRequest};
use registry_core::principal::Principal;
use registry_core::{FieldError, FieldReason};
use registry_memory::WriteRequest;
use registry_memory::search::{SearchRequest as MemorySearch, SearchResponse};
use registry_memory::service::WriteOutcome;
use registry_skills::views::{DiscoverList, InstructionsView, SelectView};
use rmcp::handler::server::common::{schema_for_output, schema_for_type};
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::parse_body;
use crate::state::AppState;

/// `memory_write`'s arguments: a memory, and the retry key that HTTP takes as a header.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct IdempotencyArg {
    /// Makes a retry return the first answer (1-200 visible ASCII characters).
    #[schemars(length(min = 1, max = 200), pattern("^[!-~]+$"))]
    idempotency_key: Option<String>,
}

/// `skill_discover`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoverArgs {
    /// Words to match (BM25); absent: all, by name.
    query: Option<String>,
    /// At most this many (1-200).
    #[schemars(range(min = 1, max = 200))]
    limit: Option<usize>,
}

/// `skill_select`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectArgs {
    name: String,
    /// Default: the current release.
    version: Option<String>,
    /// Tools the caller can offer.
    #[serde(default)]
    tools: Vec<String>,
    /// Permissions the caller holds.
    #[serde(default)]
    permissions: Vec<String>,
    /// Environment the caller runs in.
    #[serde(default)]
    environment: Vec<String>,
}

/// `skill_report_run`'s arguments besides the run as `POST …/runs` takes it.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ReportRunTarget {
    /// The skill's name.
    name: String,
    /// The version that ran.
    version: String,
}

/// The schema of a run report: `RunReport`'s, plus the skill's `name` and `version`.
fn report_run_input() -> Arc<JsonObject> {
    let mut schema = (*schema_for_type::<registry_skills::RunReport>()).clone();
    let extra = schema_for_type::<ReportRunTarget>();
    if let (Some(Value::Object(props)), Some(Value::Object(more))) =
        (schema.get_mut("properties"), extra.get("properties"))
    {
        props.extend(more.clone());
    }
    if let Some(Value::Array(req)) = schema.get_mut("required") {
        req.extend([json!("name"), json!("version")]);
    }
    Arc::new(schema)
}

/// Takes a required string argument out of `args`.
fn take_str(args: &mut JsonObject, field: &str) -> ApiResult<String> {
    match args.remove(field) {
        Some(Value::String(v)) => Ok(v),
        None | Some(Value::Null) => Err(ApiError::validation(format!("{field} is required"))
            .with_details(FieldError::new(field).reason(FieldReason::Missing))),
        Some(_) => Err(ApiError::validation(format!("{field} must be a string"))
            .with_details(FieldError::new(field).reason(FieldReason::InvalidType))),
    }
}

/// `skill_load`'s arguments: a name (and version, default the current release) or a digest.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadArgs {
    name: Option<String>,
    version: Option<String>,
    /// `sha256:<hex>` tree digest.
    digest: Option<String>,
}

fn input<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    schema_for_type::<T>()
}

/// The schema of a memory write: `WriteRequest`'s, plus `idempotency_key`.
fn memory_write_input() -> Arc<JsonObject> {
    let mut schema = (*schema_for_type::<WriteRequest>()).clone();
    let extra = schema_for_type::<IdempotencyArg>();
    if let (Some(Value::Object(props)), Some(Value::Object(more))) =
        (schema.get_mut("properties"), extra.get("properties"))
    {
        props.extend(more.clone());
    }
    Arc::new(schema)
}

/// The tool list, built once.
pub fn tools() -> &'static [Tool] {
    static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(build);
    &TOOLS
}

fn build() -> Vec<Tool> {
    let read_only = || ToolAnnotations::new().read_only(true);
    vec![
        Tool::new(
            "memory_search",
            "Search the caller's memories (past experience, not current fact). Candidates are \
             restricted to the caller's visible scopes first, then ranked by semantic, lexical, \
             entity, recency, valid-time, scope, trust and feedback signals; every hit carries \
             its score breakdown. Same answer as POST /v1/memories/search.",
            input::<MemorySearch>(),
        )
        .with_raw_output_schema(schema_for_output::<SearchResponse>())
        .with_annotations(read_only()),
        Tool::new(
            "memory_write",
            "Write a memory through the registry's write gate. The answer is the gate's \
             decision (accepted, merged, superseded, candidate, conflict_pending) with its \
             reasons; a rejection comes back as an error with code WRITE_GATE_REJECTED and the \
             reasons. Same as POST /v1/memories.",
            memory_write_input(),
        )
        .with_raw_output_schema(schema_for_output::<WriteOutcome>()),
        Tool::new(
            "knowledge_search",
            "Search knowledge evidence the caller may read (scope and ACL filtered before \
             ranking). Answers status OK with cited evidence (source, version, freshness, \
             authority, char range), or INSUFFICIENT_EVIDENCE when nothing admissible clears \
             min_score. Same as POST /v1/knowledge/search.",
            input::<registry_knowledge::SearchRequest>(),
        )
        .with_raw_output_schema(schema_for_output::<registry_knowledge::SearchAnswer>())
        .with_annotations(read_only()),
        Tool::new(
            "skill_discover",
            "List the current skill releases the caller may use, about 100 tokens each (name, \
             description, applicability, risks, version, digest). Same as GET /v1/skills.",
            input::<DiscoverArgs>(),
        )
        .with_raw_output_schema(schema_for_output::<DiscoverList>())
        .with_annotations(read_only()),
        Tool::new(
            "skill_select",
            "One skill's full manifest and versions, checked against the tools, permissions and \
             environment the caller can offer. Same as GET /v1/skills/{name}.",
            input::<SelectArgs>(),
        )
        .with_raw_output_schema(schema_for_output::<SelectView>())
        .with_annotations(read_only()),
        Tool::new(
            "skill_load",
            "Load a skill's instructions (the SKILL.md body) with its digest and token count, by \
             name (current release, or `version`) or by `digest`. Same as GET \
             /v1/skills/{name}/versions/{version}/instructions.",
            input::<LoadArgs>(),
        )
        .with_raw_output_schema(schema_for_output::<InstructionsView>())
        .with_annotations(read_only()),
        Tool::new(
            "skill_report_run",
            "Report one run of a skill version the caller may load: run_id (a retry with the \
             same body answers the same), the digest that ran, outcome (success, failure, \
             error, aborted), duration_ms, optional task and note (kept as its sha256 only). \
             Same as POST /v1/skills/{name}/versions/{version}/runs.",
            report_run_input(),
        )
        .with_raw_output_schema(schema_for_output::<registry_skills::RunView>()),
        Tool::new(
            "context_pack",
            "Compile what the model should see now: the fixed rules and goal (never cut), task \
             working memory, retrieved memory, knowledge evidence and the skill list, within a \
             token budget counted by a real tokenizer. Returns the pack and its Context \
             Manifest (every item and omission with its reason). FIXED_ZONE_OVER_BUDGET when \
             the fixed zone alone exceeds the budget. Same as POST /v1/context.",
            input::<PackRequest>(),
        )
        .with_raw_output_schema(schema_for_output::<Pack>()),
        Tool::new(
            "task_append",
            "Append events to a task's log (append-only; an event id appended before answers \
             its stored sequence number and counts once). Types: user_message, decision, \
             tool_call, tool_result, error, note, open_item, resolved_item, approval, plan. \
             Large results go to an artifact (PUT /v1/tasks/{id}/artifacts/{name}). Same as \
             POST /v1/tasks/{id}/events.",
            input::<registry_tasks::TaskAppendArgs>(),
        )
        .with_raw_output_schema(schema_for_output::<registry_tasks::AppendOutcome>()),
        Tool::new(
            "artifact_read_range",
            "Read exactly a range of a task's artifact: bytes `offset`..`offset+length`, or \
             `lines` lines from `line` (counted from 1). The content is UTF-8 text, or base64 \
             when the bytes are not UTF-8 (`encoding`). Same bytes as GET /v1/artifacts/{id}.",
            input::<registry_tasks::ReadRange>(),
        )
        .with_raw_output_schema(schema_for_output::<registry_tasks::RangeAnswer>())
        .with_annotations(read_only()),
        Tool::new(
            "task_continuation",
            "Assemble a task's Continuation Package within a token budget: goal and acceptance, \
             next step, latest summary, open items, decisions, approvals, artifact references, \
             working memory and the events after the summary, with a manifest. Deterministic. \
             Same as POST /v1/tasks/{id}/continuation.",
            input::<registry_tasks::TaskContinuationArgs>(),
        )
        .with_raw_output_schema(schema_for_output::<registry_tasks::Continuation>())
        .with_annotations(read_only()),
    ]
}

/// A range of an artifact as JSON: text when the bytes are UTF-8, base64 otherwise.
fn range_answer(r: registry_tasks::RangeBytes) -> registry_tasks::RangeAnswer {
    use base64::Engine;
    let length = r.bytes.len() as u64;
    let (encoding, content) = match String::from_utf8(r.bytes) {
        Ok(s) => ("utf8", s),
        Err(e) => (
            "base64",
            base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
        ),
    };
    registry_tasks::RangeAnswer {
        id: r.artifact.id,
        digest: r.artifact.digest,
        size: r.artifact.size,
        offset: r.offset,
        length,
        encoding: encoding.into(),
        content,
    }
}

/// A tool answer: the same JSON as the HTTP API, or its error body.
pub fn answer(r: ApiResult<Value>) -> CallToolResult {
    match r {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => CallToolResult::structured_error(json!({
            "error": {"code": e.code.as_str(), "message": e.message, "details": e.details}
        })),
    }
}

/// Arguments are read like an HTTP body: a wrong one answers `VALIDATION_FAILED` naming the
/// field (`details.field`, `details.reason`).
fn parse<T: for<'de> Deserialize<'de>>(args: JsonObject) -> ApiResult<T> {
    let bytes = serde_json::to_vec(&Value::Object(args)).map_err(ApiError::internal)?;
    parse_body(&bytes).map_err(|mut e| {
        e.message = e.message.replacen("invalid body", "invalid arguments", 1);
        e
    })
}

/// The answer exactly as the HTTP route writes it: through the JSON text, so that an `f32`
/// reads back as the same shortest decimal (`0.35`) and not as its widened `f64`.
fn to_value<T: serde::Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_vec(v)
        .and_then(|b| serde_json::from_slice(&b))
        .map_err(ApiError::internal)
}

/// Runs tool `name`.
pub fn call(s: &AppState, p: &Principal, name: &str, mut args: JsonObject) -> ApiResult<Value> {
    match name {
        "memory_search" => {
            let req: MemorySearch = parse(args)?;
            let res = s.services.memory.search(p, &req)?;
            to_value(&res)
        }
        "memory_write" => {
            let key = match args.remove("idempotency_key") {
                None | Some(Value::Null) => None,
                Some(Value::String(k)) if crate::extract::idempotency_key_ok(&k) => Some(k),
                Some(_) => {
                    return Err(ApiError::validation(
                        "idempotency_key must be 1-200 visible ASCII characters",
                    )
                    .with_details(
                        FieldError::new("idempotency_key").reason(FieldReason::Invalid),
                    ));
                }
            };
            let req: WriteRequest = parse(args)?;
            to_value(&s.services.memory.write(p, &req, key.as_deref())?)
        }
        "knowledge_search" => {
            let req: registry_knowledge::SearchRequest = parse(args)?;
            to_value(&s.services.knowledge.search(p, req)?)
        }
        "skill_discover" => {
            let a: DiscoverArgs = parse(args)?;
            to_value(
                &s.services
                    .skills
                    .discover_list(p, a.query.as_deref(), a.limit)?,
            )
        }
        "skill_select" => {
            let a: SelectArgs = parse(args)?;
            to_value(&s.services.skills.select_view(
                p,
                &a.name,
                a.version.as_deref(),
                &a.tools,
                &a.permissions,
                &a.environment,
            )?)
        }
        "skill_load" => {
            let a: LoadArgs = parse(args)?;
            let loaded = match (&a.digest, &a.name) {
                (Some(d), _) => s.services.skills.resolve_digest(p, d)?,
                (None, Some(n)) => match &a.version {
                    Some(v) => s.services.skills.resolve(p, n, v)?,
                    None => s.services.skills.current(p, n)?,
                },
                (None, None) => {
                    return Err(ApiError::validation("give a name or a digest")
                        .with_details(FieldError::new("name").reason(FieldReason::Missing)));
                }
            };
            to_value(&s.services.skills.instructions_view(&loaded)?)
        }
        "skill_report_run" => {
            let name = take_str(&mut args, "name")?;
            let version = take_str(&mut args, "version")?;
            let run: registry_skills::RunReport = parse(args)?;
            to_value(&s.services.skills.report_run(p, &name, &version, run)?)
        }
        "context_pack" => {
            let req: PackRequest = parse(args)?;
            let pack: Pack = s.services.context.compile(p, &req)?;
            to_value(&pack)
        }
        "task_append" => {
            let a: registry_tasks::TaskAppendArgs = parse(args)?;
            let req = registry_tasks::AppendEvents { events: a.events };
            to_value(&s.services.tasks.append(p, &a.task, req)?)
        }
        "artifact_read_range" => {
            let a: registry_tasks::ReadRange = parse(args)?;
            let r = s.services.tasks.read_range(p, &a.id, &a.range())?;
            to_value(&range_answer(r))
        }
        "task_continuation" => {
            let a: registry_tasks::TaskContinuationArgs = parse(args)?;
            let req = registry_tasks::ContinuationRequest {
                budget: a.budget,
                checkpoint: a.checkpoint,
            };
            to_value(&s.services.tasks.continuation(p, &a.task, &req)?)
        }
        other => Err(ApiError::not_found(format!("no tool {other}"))),
    }
}
