"""Typed request and answer bodies of the Harness Registry HTTP API.

Each model mirrors a schema of the server's OpenAPI document (named in its docstring); the
package's tests compare every model with the live document, so a renamed or dropped field
fails there first. Answers accept fields this version does not know yet (``extra="allow"``);
requests refuse unknown fields, as the server does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

MemoryClass = Literal["working", "episodic", "semantic", "procedural"]
LevelName = Literal["tenant", "project", "user", "session", "task"]
SourceKind = Literal[
    "user_statement", "tool_result", "document", "model_inference", "system", "import", "web"
]
Sensitivity = Literal["public", "internal", "confidential", "secret"]
Trust = Literal[
    "external_content",
    "model_inference",
    "user_statement",
    "verified_fact",
    "authoritative_system",
    "platform_rule",
]


class Request(BaseModel):
    """A request body: unknown fields are refused, unset fields are not sent."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def body(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Answer(BaseModel):
    """An answer body: fields added by a newer server are kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


# --- memory ---------------------------------------------------------------------------------


class Scope(Request):
    """OpenAPI ``Scope``: an explicit position (the tenant is always the key's)."""

    tenant: Optional[str] = None
    project: Optional[str] = None
    user: Optional[str] = None
    session: Optional[str] = None
    task: Optional[str] = None


class WriteRequest(Request):
    """OpenAPI ``WriteRequest`` (``POST /v1/memories``)."""

    memory_class: MemoryClass = Field(alias="class")
    content: str
    scope: Optional[Union[LevelName, Scope]] = None
    source: Optional[SourceKind] = None
    subject: Optional[str] = None
    attribute: Optional[str] = None
    value: Optional[str] = None
    entities: Optional[list[str]] = None
    applicability: Optional[list[str]] = None
    evidence: Optional[list[str]] = None
    speaker: Optional[str] = None
    session_date: Optional[datetime] = None
    session_label: Optional[str] = None
    valid_from: Optional[datetime] = None
    valid_to: Optional[datetime] = None
    ttl_secs: Optional[int] = None
    sensitivity: Optional[Sensitivity] = None
    purposes: Optional[list[str]] = None


class Reason(Answer):
    """OpenAPI ``Reason``: one rule of the write gate and what it found."""

    code: str
    rule: int
    detail: str


class WriteOutcome(Answer):
    """OpenAPI ``WriteOutcome``: the gate's decision."""

    decision: Literal["accepted", "merged", "superseded", "candidate", "conflict_pending", "rejected"]
    id: str
    version: int
    status: str
    reasons: list[Reason]
    replaced: Optional[str] = None
    conflicts_with: Optional[str] = None


class SearchFilters(Request):
    """OpenAPI ``SearchFilters``."""

    entities: Optional[list[str]] = None
    speaker: Optional[str] = None
    subject: Optional[str] = None
    min_trust: Optional[Trust] = None
    session_label: Optional[str] = None


class MemorySearchRequest(Request):
    """OpenAPI ``MemorySearchRequest`` (``POST /v1/memories/search``)."""

    query: str
    classes: Optional[list[MemoryClass]] = None
    scope: Optional[LevelName] = None
    k: Optional[int] = None
    as_of: Optional[datetime] = None
    filters: Optional[SearchFilters] = None


class UsageStats(Answer):
    """OpenAPI ``UsageStats``: how a memory has been used."""

    usage_count: int
    helpful: int
    harmful: int


class MemoryView(Answer):
    """OpenAPI ``MemoryView``: one memory record with its governance fields."""

    id: str
    version: int
    status: str
    memory_class: MemoryClass = Field(alias="class")
    content: str
    scope: str
    owner: str
    source: SourceKind
    trust: Trust
    sensitivity: Sensitivity
    subject: Optional[str] = None
    attribute: Optional[str] = None
    value: Optional[str] = None
    created_at: datetime
    content_hash: str
    stats: UsageStats


class Breakdown(Answer):
    """OpenAPI ``Breakdown``: each signal's part of a memory hit's score."""

    semantic: float
    lexical: float
    entity: float
    recency: float
    trust: float
    feedback: float


class MemoryHit(Answer):
    """OpenAPI ``MemoryHit``: past experience, never current fact."""

    label: str
    note: str
    score: float
    breakdown: Breakdown
    memory: MemoryView


class MemorySearchAnswer(Answer):
    """OpenAPI ``SearchResponse``."""

    label: str
    as_of: datetime
    hits: list[MemoryHit]


# --- deletion -------------------------------------------------------------------------------


class ReceiptCounts(Answer):
    """OpenAPI ``ReceiptCounts``."""

    assets: int
    versions: int
    text_entries: int
    vectors: int


class Receipt(Answer):
    """OpenAPI ``Receipt``: what a deletion reached, store by store."""

    id: str
    actor: str
    reason: str
    roots: list[str]
    target: Literal["revoked", "de_indexed", "purged"]
    status: str
    level_reached: Literal["revoked", "de_indexed", "purged"]
    counts: ReceiptCounts


class RevokedMemory(MemoryView):
    """OpenAPI ``MemoryItem``: the revoked record, with the receipt after a purge."""

    receipt: Optional[Receipt] = None


# --- knowledge ------------------------------------------------------------------------------


class IngestRequest(Request):
    """OpenAPI ``IngestRequest`` (``POST /v1/knowledge/documents``)."""

    source_id: str
    format: Literal["md", "markdown", "txt", "json", "jsonl"]
    content: str
    version: Optional[str] = None
    effective_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    owner: Optional[str] = None
    authority: Optional[Literal["policy", "system_of_record", "reference", "informal"]] = None
    scope: Optional[Scope] = None
    acl: Optional[list[str]] = None
    sensitivity: Optional[Sensitivity] = None
    purposes: Optional[list[str]] = None
    retain_until: Optional[datetime] = None


class IngestOutcome(Answer):
    """OpenAPI ``IngestOutcome``."""

    status: Literal["created", "new_version", "unchanged"]
    document_id: str
    version: int
    source_id: str
    source_version: str
    content_hash: str
    chunks: int
    superseded_chunks: int
    flagged_chunks: int


class KnowledgeSearchRequest(Request):
    """OpenAPI ``KnowledgeSearchRequest`` (``POST /v1/knowledge/search``)."""

    query: str
    k: Optional[int] = None
    as_of: Optional[datetime] = None
    min_score: Optional[float] = None
    allow_stale: Optional[bool] = None
    legs: Optional[Literal["both", "text_only", "vector_only"]] = None
    fusion: Optional[Literal["rrf", "convex"]] = None
    alpha: Optional[float] = None


class Citation(Answer):
    """OpenAPI ``Citation``: where in which document version the evidence stands."""

    document_id: str
    document_version: int
    chunk_id: str
    char_start: int
    char_end: int


class Evidence(Answer):
    """OpenAPI ``Evidence``."""

    content: str
    heading_path: list[str]
    source_id: str
    source_version: str
    owner: str
    authority: str
    scope: str
    acl: list[str]
    score: float
    citation: Citation


class EvidenceAnswer(Answer):
    """OpenAPI ``EvidenceAnswer``: ``OK`` with evidence, or ``INSUFFICIENT_EVIDENCE``."""

    status: Literal["OK", "INSUFFICIENT_EVIDENCE"]
    evidence: list[Evidence]


class DocumentSummary(Answer):
    """OpenAPI ``DocumentSummary``."""

    id: str
    version: int
    status: str
    source_id: str
    source_version: str
    chunk_count: int


class DocumentList(Answer):
    """OpenAPI ``DocumentList``."""

    documents: list[DocumentSummary]


# --- skills ---------------------------------------------------------------------------------


class DiscoverView(Answer):
    """OpenAPI ``DiscoverView``: a skill in about 100 tokens."""

    name: str
    description: str
    applicability: list[str]
    risks: list[str]
    version: str
    digest: str
    scope: str
    deprecated: bool
    tokens: int


class DiscoverList(Answer):
    """OpenAPI ``DiscoverList`` (``GET /v1/skills``)."""

    skills: list[DiscoverView]
    total_tokens: int
    tokenizer: str


class VersionSummary(Answer):
    """OpenAPI ``VersionSummary``."""

    version: str
    digest: str
    state: str
    yanked: bool


class ScanFinding(Answer):
    """OpenAPI ``Finding``: one thing the supply-chain scan found (``rule`` is stable)."""

    rule: str
    severity: Literal["warn", "fail"]
    file: str
    line: int
    excerpt: str
    message: str


class ScanReport(Answer):
    """OpenAPI ``ScanReport``: the scan run at publish."""

    verdict: Literal["pass", "warn", "fail"]
    findings: list[ScanFinding]


class ScanOverride(Answer):
    """OpenAPI ``ScanOverride``: a platform principal's override of a failing scan."""

    by: str
    reason: str
    digest: str
    at: datetime


class VersionView(Answer):
    """OpenAPI ``VersionView``."""

    id: str
    name: str
    version: str
    digest: str
    state: str
    manifest: dict[str, Any]
    frontmatter: dict[str, Any]
    # ``null`` for a version stored before the scan existed.
    scan: Optional[ScanReport] = None
    scan_override: Optional[ScanOverride] = None


class SelectView(Answer):
    """OpenAPI ``SelectView`` (``GET /v1/skills/{name}``)."""

    name: str
    current: Optional[str] = None
    versions: list[VersionSummary]
    selected: VersionView
    executable: bool
    reasons: list[str]


class InstructionsView(Answer):
    """OpenAPI ``InstructionsView``."""

    name: str
    version: str
    digest: str
    instructions: str
    tokens: int


RunOutcome = Literal["success", "failure", "error", "aborted"]


class RunReport(Request):
    """OpenAPI ``RunReport`` (``POST /v1/skills/{name}/versions/{version}/runs``): one run of a
    version, idempotent by ``run_id``; ``duration_ms`` is at most 86,400,000; the note is kept as
    its sha256 only."""

    run_id: str
    digest: str
    outcome: RunOutcome
    duration_ms: int = Field(ge=0, le=86_400_000)
    task: Optional[str] = None
    note: Optional[str] = None


class RunView(Answer):
    """OpenAPI ``RunView``: a recorded run (a retry answers the same)."""

    id: str
    run_id: str
    name: str
    version: str
    digest: str
    outcome: RunOutcome
    duration_ms: int
    task: Optional[str] = None
    note_sha256: Optional[str] = None
    reported_by: str
    at: datetime


class RunStats(Answer):
    """OpenAPI ``RunStats``: a version's observed figures (success rate with its Wilson 95%
    interval, nearest-rank duration percentiles)."""

    runs: int
    successes: int
    failures: int
    errors: int
    aborted: int
    success_rate: Optional[float] = None
    success_low: Optional[float] = None
    success_high: Optional[float] = None
    failure_rate: Optional[float] = None
    duration_p50_ms: Optional[int] = None
    duration_p95_ms: Optional[int] = None
    last_used_at: Optional[datetime] = None


class RunComparison(Answer):
    """OpenAPI ``RunComparison``: against the release it replaced (``worse``, ``better``,
    ``indistinguishable`` or ``insufficient``)."""

    predecessor: str
    predecessor_digest: str
    predecessor_stats: RunStats
    verdict: str


class ObserveFlag(Answer):
    """OpenAPI ``ObserveFlag``: why observed runs put a release back in review."""

    reason: str
    at: datetime
    runs: int
    failure_rate: float
    predecessor: Optional[str] = None


class RunSummary(Answer):
    """OpenAPI ``RunSummary`` (``GET /v1/skills/{name}/versions/{version}/runs/summary``)."""

    name: str
    version: str
    digest: str
    stats: RunStats
    compared_with: Optional[RunComparison] = None
    observe_flag: Optional[ObserveFlag] = None
    #: Runs the version's author reported: kept, not counted in ``stats``.
    author_runs: int = 0
    max_failure_rate: float
    min_runs: int


# --- context packs --------------------------------------------------------------------------


class PackRequest(Request):
    """OpenAPI ``PackRequest`` (``POST /v1/context``)."""

    goal: str
    budget: int
    phase: Optional[str] = None
    fixed_rules: Optional[list[str]] = None
    query: Optional[str] = None
    draw_on: Optional[list[Literal["working_memory", "memory", "knowledge", "skills"]]] = None
    memory_scope: Optional[LevelName] = None
    min_score: Optional[float] = None
    allow_stale: Optional[bool] = None
    as_of: Optional[datetime] = None
    task: Optional[str] = None


class PackItem(Answer):
    """OpenAPI ``PackItem``."""

    layer: str
    source_type: str
    source_id: Optional[str] = None
    content: str
    tokens: int
    transform: str


class ManifestItem(Answer):
    """OpenAPI ``ManifestItem``: the manifest's account of an included item."""

    position: int
    layer: str
    source_type: str
    source_id: Optional[str] = None
    scope: Optional[str] = None
    version: Optional[str] = None
    trust: Optional[str] = None
    permission_basis: str
    selected_reason: str
    tokens: int
    transform: str
    content_hash: str
    asset_content_hash: Optional[str] = None


class Omission(Answer):
    """OpenAPI ``Omission``: a candidate left out, and why."""

    layer: str
    source_type: str
    source_id: Optional[str] = None
    scope: Optional[str] = None
    version: Optional[str] = None
    reason: str
    detail: str
    tokens: Optional[int] = None
    content_hash: str


class Manifest(Answer):
    """OpenAPI ``Manifest``: every item and every omission, with its reason."""

    id: str
    budget: int
    used_tokens: int
    items: list[ManifestItem]
    omitted: list[Omission]


class Pack(Answer):
    """OpenAPI ``Pack``."""

    id: str
    budget: int
    used_tokens: int
    text: str
    items: list[PackItem]
    manifest: Manifest


class ReplayItem(Answer):
    """OpenAPI ``ReplayItem``: an item as one of the two packs holds it."""

    position: int
    layer: str
    source_id: Optional[str] = None
    version: Optional[str] = None
    content_hash: str
    asset_content_hash: Optional[str] = None


class ReplayChange(Answer):
    """OpenAPI ``ReplayChange``: ``added``, ``removed`` or ``changed``, with its reasons."""

    change: Literal["added", "removed", "changed"]
    source_type: str
    before: Optional[ReplayItem] = None
    after: Optional[ReplayItem] = None
    reasons: list[str]


class Replay(Answer):
    """OpenAPI ``Replay`` (``POST /v1/context/{id}/replay``)."""

    manifest_id: str
    compiled_at: datetime
    replayed_at: datetime
    used_tokens_before: int
    used_tokens_after: int
    changes: list[ReplayChange]
    unchanged: int


# --- change impact --------------------------------------------------------------------------


class ImpactSubject(Answer):
    """OpenAPI ``ImpactSubject``: the asset whose impact is shown."""

    id: str
    kind: str
    version: int
    status: str
    content_hash: str
    skill: Optional[str] = None


class ManifestUse(Answer):
    """OpenAPI ``ManifestUse``: a manifest that included the asset, and its items for it."""

    id: str
    principal: str
    created_at: datetime
    replayable: bool
    items: list[ReplayItem]


class ManifestsImpact(Answer):
    """OpenAPI ``ManifestsImpact``."""

    total: int
    recent: list[ManifestUse]


class LinkedAsset(Answer):
    """OpenAPI ``LinkedAsset``: an asset that cites or was derived from the subject."""

    id: str
    kind: str
    relation: str
    version: int
    status: str
    content_hash: str
    skill: Optional[str] = None


class RunUse(Answer):
    """OpenAPI ``RunUse``: a harness run that loaded the asset."""

    run_id: str
    digest: str
    outcome: str
    at: datetime


class Impact(Answer):
    """OpenAPI ``Impact`` (``GET /v1/assets/{id}/impact``)."""

    asset: ImpactSubject
    manifests: ManifestsImpact
    citing: list[LinkedAsset]
    derived: list[LinkedAsset]
    runs: list[RunUse]
    truncated: bool


# --- skill drafts from procedures -----------------------------------------------------------


class DraftFromMemoryRequest(Request):
    """OpenAPI ``DraftFromMemoryRequest`` (``POST /v1/skills/drafts/from-memory``)."""

    memory_ids: list[str]
    name: str
    description: Optional[str] = None
    version: Optional[str] = None


class DraftEvidence(Answer):
    """OpenAPI ``DraftEvidence``: a memory the draft was made from."""

    memory_id: str
    version: int
    content_hash: str


class DraftAnswer(Answer):
    """OpenAPI ``DraftAnswer``."""

    draft: VersionView
    evidence: list[DraftEvidence]


# --- tasks (the working layer) -------------------------------------------------------------

TaskStatus = Literal["open", "paused", "done", "failed"]
EventType = Literal[
    "user_message",
    "decision",
    "tool_call",
    "tool_result",
    "error",
    "note",
    "open_item",
    "resolved_item",
    "approval",
    "plan",
]


class CreateTask(Request):
    """OpenAPI ``CreateTask`` (``POST /v1/tasks``)."""

    goal: str
    acceptance: Optional[str] = None
    project: Optional[str] = None
    session: Optional[str] = None
    sensitivity: Optional[Sensitivity] = None


class UpdateTask(Request):
    """OpenAPI ``UpdateTask`` (``PATCH /v1/tasks/{id}``): from the head ``version`` read."""

    version: int
    status: Optional[TaskStatus] = None
    next_step: Optional[str] = None


class TaskView(Answer):
    """OpenAPI ``TaskView``."""

    id: str
    version: int
    status: TaskStatus
    goal: str
    acceptance: Optional[str] = None
    next_step: Optional[str] = None
    scope: str
    owner: str
    sensitivity: Sensitivity
    created_at: datetime
    updated_at: datetime
    closed_at: Optional[datetime] = None
    last_seq: int
    content_hash: str


class TaskList(Answer):
    """OpenAPI ``TaskList``."""

    tasks: list[TaskView]


class EventInput(Request):
    """OpenAPI ``EventInput``: one event to append (``id`` is the client's, idempotent)."""

    id: str
    event_type: EventType = Field(alias="type")
    actor: str
    content: str
    artifact: Optional[str] = None
    caused_by: Optional[str] = None


class AppendEvents(Request):
    """OpenAPI ``AppendEvents`` (``POST /v1/tasks/{id}/events``)."""

    events: list[EventInput]


class AppendedEvent(Answer):
    """OpenAPI ``AppendedEvent``."""

    id: str
    seq: int
    duplicate: bool


class AppendOutcome(Answer):
    """OpenAPI ``AppendOutcome``."""

    events: list[AppendedEvent]
    appended: int
    duplicates: int
    last_seq: int


class TaskEvent(Answer):
    """OpenAPI ``TaskEvent``: a stored event."""

    seq: int
    id: str
    event_type: EventType = Field(alias="type")
    actor: str
    at: datetime
    content: str
    artifact: Optional[str] = None
    caused_by: Optional[str] = None
    flags: Optional[list[str]] = None
    content_hash: str


class EventPage(Answer):
    """OpenAPI ``EventPage``: ``next`` is the ``after`` of the next page."""

    events: list[TaskEvent]
    next: Optional[int] = None


class ArtifactView(Answer):
    """OpenAPI ``ArtifactView``."""

    id: str
    task: str
    name: str
    digest: str
    size: int
    lines: int
    media_type: str
    summary: Optional[str] = None
    created_at: datetime


class ArtifactList(Answer):
    """OpenAPI ``ArtifactList``."""

    artifacts: list[ArtifactView]


class SummaryRequest(Request):
    """OpenAPI ``SummaryRequest`` (``POST /v1/tasks/{id}/summaries``)."""

    from_seq: int
    to_seq: int
    content: str


class CheckpointRequest(Request):
    """OpenAPI ``CheckpointRequest`` (``POST /v1/tasks/{id}/checkpoints``)."""

    seq: Optional[int] = None
    label: Optional[str] = None


class TaskMark(Answer):
    """OpenAPI ``TaskMark``: a compaction summary or a checkpoint."""

    id: str
    kind: Literal["summary", "checkpoint"]
    from_seq: int
    to_seq: int
    covered_hash: str
    content: str
    created_at: datetime


class MarkList(Answer):
    """OpenAPI ``MarkList``."""

    marks: list[TaskMark]


class ContinuationRequest(Request):
    """OpenAPI ``ContinuationRequest`` (``POST /v1/tasks/{id}/continuation``)."""

    budget: int
    checkpoint: Optional[str] = None


class ContinuationItem(Answer):
    """OpenAPI ``ContinuationItem``."""

    section: str
    source_type: str
    source_id: Optional[str] = None
    seq: Optional[int] = None
    content: str
    tokens: int


class ContinuationEntry(Answer):
    """OpenAPI ``ContinuationEntry``: the manifest's account of an included item."""

    position: int
    section: str
    source_type: str
    source_id: Optional[str] = None
    seq: Optional[int] = None
    tokens: int
    content_hash: str
    selected_reason: str


class ContinuationOmission(Answer):
    """OpenAPI ``ContinuationOmission``."""

    section: str
    source_type: str
    source_id: Optional[str] = None
    seq: Optional[int] = None
    reason: str
    tokens: Optional[int] = None
    content_hash: str


class ContinuationManifest(Answer):
    """OpenAPI ``ContinuationManifest``: ids, hashes and counts, never content."""

    id: str
    task: str
    task_version: int
    through_seq: int
    checkpoint: Optional[str] = None
    summary: Optional[str] = None
    budget: int
    fixed_tokens: int
    used_tokens: int
    tokenizer: str
    items: list[ContinuationEntry]
    omitted: list[ContinuationOmission]


class Continuation(Answer):
    """OpenAPI ``Continuation``: the Continuation Package."""

    id: str
    task: str
    budget: int
    used_tokens: int
    text: str
    items: list[ContinuationItem]
    manifest: ContinuationManifest


# Every model and the OpenAPI component it mirrors (the tests walk this table).
SCHEMAS: dict[type[BaseModel], str] = {
    Scope: "Scope",
    WriteRequest: "WriteRequest",
    Reason: "Reason",
    WriteOutcome: "WriteOutcome",
    SearchFilters: "SearchFilters",
    MemorySearchRequest: "MemorySearchRequest",
    UsageStats: "UsageStats",
    MemoryView: "MemoryView",
    Breakdown: "Breakdown",
    MemoryHit: "MemoryHit",
    MemorySearchAnswer: "SearchResponse",
    ReceiptCounts: "ReceiptCounts",
    Receipt: "Receipt",
    RevokedMemory: "MemoryItem",
    IngestRequest: "IngestRequest",
    IngestOutcome: "IngestOutcome",
    KnowledgeSearchRequest: "KnowledgeSearchRequest",
    Citation: "Citation",
    Evidence: "Evidence",
    EvidenceAnswer: "EvidenceAnswer",
    DocumentSummary: "DocumentSummary",
    DocumentList: "DocumentList",
    DiscoverView: "DiscoverView",
    DiscoverList: "DiscoverList",
    VersionSummary: "VersionSummary",
    ScanFinding: "Finding",
    ScanReport: "ScanReport",
    ScanOverride: "ScanOverride",
    VersionView: "VersionView",
    SelectView: "SelectView",
    InstructionsView: "InstructionsView",
    RunReport: "RunReport",
    RunView: "RunView",
    RunStats: "RunStats",
    RunComparison: "RunComparison",
    ObserveFlag: "ObserveFlag",
    RunSummary: "RunSummary",
    PackRequest: "PackRequest",
    PackItem: "PackItem",
    ManifestItem: "ManifestItem",
    Omission: "Omission",
    Manifest: "Manifest",
    Pack: "Pack",
    ReplayItem: "ReplayItem",
    ReplayChange: "ReplayChange",
    Replay: "Replay",
    ImpactSubject: "ImpactSubject",
    ManifestUse: "ManifestUse",
    ManifestsImpact: "ManifestsImpact",
    LinkedAsset: "LinkedAsset",
    RunUse: "RunUse",
    Impact: "Impact",
    DraftFromMemoryRequest: "DraftFromMemoryRequest",
    DraftEvidence: "DraftEvidence",
    DraftAnswer: "DraftAnswer",
    CreateTask: "CreateTask",
    UpdateTask: "UpdateTask",
    TaskView: "TaskView",
    TaskList: "TaskList",
    EventInput: "EventInput",
    AppendEvents: "AppendEvents",
    AppendedEvent: "AppendedEvent",
    AppendOutcome: "AppendOutcome",
    TaskEvent: "TaskEvent",
    EventPage: "EventPage",
    ArtifactView: "ArtifactView",
    ArtifactList: "ArtifactList",
    SummaryRequest: "SummaryRequest",
    CheckpointRequest: "CheckpointRequest",
    TaskMark: "TaskMark",
    MarkList: "MarkList",
    ContinuationRequest: "ContinuationRequest",
    ContinuationItem: "ContinuationItem",
    ContinuationEntry: "ContinuationEntry",
    ContinuationOmission: "ContinuationOmission",
    ContinuationManifest: "ContinuationManifest",
    Continuation: "Continuation",
}
