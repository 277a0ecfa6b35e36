"""The HTTP client: one method per operation, typed bodies in and out."""

from __future__ import annotations

from typing import Any, Optional, TypeVar, Union
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from . import models as m

A = TypeVar("A", bound=BaseModel)


class RegistryError(Exception):
    """An error answer: the HTTP status and the server's stable ``code`` (``NOT_FOUND``,
    ``VALIDATION_FAILED``, ``WRITE_GATE_REJECTED``, …) with its ``details`` (for a validation
    failure: ``field``, the JSON path at fault, and ``reason``)."""

    def __init__(self, status: int, code: str, message: str, details: Any):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def _seg(s: str) -> str:
    return quote(s, safe="")


class _Api:
    def __init__(self, http: httpx.Client):
        self._http = http

    def _raise_for(self, r: httpx.Response) -> None:
        """Raises the error answer ``r`` carries, if it is one."""
        if r.status_code < 400:
            return
        try:
            data = r.json()
        except ValueError:
            raise RegistryError(r.status_code, "BAD_RESPONSE", r.text[:200], None) from None
        err = data.get("error", {}) if isinstance(data, dict) else {}
        raise RegistryError(
            r.status_code, err.get("code", "UNKNOWN"), err.get("message", ""), err.get("details")
        )

    def _call(
        self,
        method: str,
        path: str,
        answer: type[A],
        body: Optional[m.Request] = None,
        params: Optional[dict[str, Any]] = None,
        headers: Optional[dict[str, str]] = None,
    ) -> A:
        r = self._http.request(
            method,
            path,
            json=body.body() if body is not None else None,
            params={k: v for k, v in (params or {}).items() if v is not None},
            headers=headers,
        )
        try:
            data = r.json()
        except ValueError:
            raise RegistryError(r.status_code, "BAD_RESPONSE", r.text[:200], None) from None
        if r.status_code >= 400:
            err = data.get("error", {}) if isinstance(data, dict) else {}
            raise RegistryError(
                r.status_code,
                err.get("code", "UNKNOWN"),
                err.get("message", ""),
                err.get("details"),
            )
        return answer.model_validate(data)


class Memory(_Api):
    """Memory: writes through the gate, search, feedback, revocation."""

    def write(
        self,
        request: Optional[m.WriteRequest] = None,
        *,
        idempotency_key: Optional[str] = None,
        **fields: Any,
    ) -> m.WriteOutcome:
        """``POST /v1/memories``; a rejection raises ``RegistryError`` (``WRITE_GATE_REJECTED``)."""
        req = request or m.WriteRequest(**fields)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._call("POST", "/v1/memories", m.WriteOutcome, req, headers=headers)

    def search(
        self, query: Union[str, m.MemorySearchRequest], **fields: Any
    ) -> m.MemorySearchAnswer:
        """``POST /v1/memories/search``."""
        req = query if isinstance(query, m.MemorySearchRequest) else m.MemorySearchRequest(
            query=query, **fields
        )
        return self._call("POST", "/v1/memories/search", m.MemorySearchAnswer, req)

    def delete(self, memory_id: str, *, purge: bool = False) -> m.RevokedMemory:
        """``DELETE /v1/memories/{id}``: revoked now; with ``purge``, gone from disk, with the
        receipt."""
        params = {"level": "purged"} if purge else None
        return self._call(
            "DELETE", f"/v1/memories/{_seg(memory_id)}", m.RevokedMemory, params=params
        )


class Knowledge(_Api):
    """Knowledge: documents ingested as governed evidence, and the evidence search."""

    def ingest(self, request: Optional[m.IngestRequest] = None, **fields: Any) -> m.IngestOutcome:
        """``POST /v1/knowledge/documents``."""
        req = request or m.IngestRequest(**fields)
        return self._call("POST", "/v1/knowledge/documents", m.IngestOutcome, req)

    def search(
        self, query: Union[str, m.KnowledgeSearchRequest], **fields: Any
    ) -> m.EvidenceAnswer:
        """``POST /v1/knowledge/search``: ``status`` is ``OK`` or ``INSUFFICIENT_EVIDENCE``."""
        req = query if isinstance(query, m.KnowledgeSearchRequest) else m.KnowledgeSearchRequest(
            query=query, **fields
        )
        return self._call("POST", "/v1/knowledge/search", m.EvidenceAnswer, req)

    def documents(self, *, limit: Optional[int] = None, after: Optional[str] = None) -> m.DocumentList:
        """``GET /v1/knowledge/documents``."""
        return self._call(
            "GET", "/v1/knowledge/documents", m.DocumentList, params={"limit": limit, "after": after}
        )

    def delete(self, document_id: str) -> m.Receipt:
        """``DELETE /v1/knowledge/documents/{id}``: every version purged, with the receipt."""
        return self._call("DELETE", f"/v1/knowledge/documents/{_seg(document_id)}", m.Receipt)


class Skills(_Api):
    """Skills: discover (list), select (get), load (instructions), and the runs a harness
    reports after Publish (report_run, runs)."""

    def list(self, query: Optional[str] = None, *, limit: Optional[int] = None) -> m.DiscoverList:
        """``GET /v1/skills``."""
        return self._call("GET", "/v1/skills", m.DiscoverList, params={"q": query, "limit": limit})

    def get(self, name: str, *, version: Optional[str] = None) -> m.SelectView:
        """``GET /v1/skills/{name}``."""
        return self._call(
            "GET", f"/v1/skills/{_seg(name)}", m.SelectView, params={"version": version}
        )

    def instructions(self, name: str, version: str) -> m.InstructionsView:
        """``GET /v1/skills/{name}/versions/{version}/instructions``."""
        return self._call(
            "GET",
            f"/v1/skills/{_seg(name)}/versions/{_seg(version)}/instructions",
            m.InstructionsView,
        )

    def report_run(
        self, name: str, version: str, request: Optional[m.RunReport] = None, **fields: Any
    ) -> m.RunView:
        """``POST /v1/skills/{name}/versions/{version}/runs``: idempotent by ``run_id`` (another
        body under the same ``run_id``, or a digest the version does not have: ``CONFLICT``)."""
        req = request or m.RunReport(**fields)
        return self._call(
            "POST", f"/v1/skills/{_seg(name)}/versions/{_seg(version)}/runs", m.RunView, req
        )

    def runs(self, name: str, version: str) -> m.RunSummary:
        """``GET /v1/skills/{name}/versions/{version}/runs/summary``: the runs the key may see."""
        return self._call(
            "GET",
            f"/v1/skills/{_seg(name)}/versions/{_seg(version)}/runs/summary",
            m.RunSummary,
        )


    def draft_from_memory(
        self, request: Optional[m.DraftFromMemoryRequest] = None, **fields: Any
    ) -> m.DraftAnswer:
        """``POST /v1/skills/drafts/from-memory``: reviewed procedural memories become a draft
        (``MEMORY_NOT_ELIGIBLE`` names the memory that does not qualify and why)."""
        req = request or m.DraftFromMemoryRequest(**fields)
        return self._call("POST", "/v1/skills/drafts/from-memory", m.DraftAnswer, req)


class Assets(_Api):
    """Any asset by id: what a change to it reaches."""

    def impact(self, asset_id: str, *, limit: Optional[int] = None) -> m.Impact:
        """``GET /v1/assets/{id}/impact``."""
        return self._call(
            "GET", f"/v1/assets/{_seg(asset_id)}/impact", m.Impact, params={"limit": limit}
        )


class Context(_Api):
    """Context packs and their manifests."""

    def pack(self, request: Optional[m.PackRequest] = None, **fields: Any) -> m.Pack:
        """``POST /v1/context``."""
        req = request or m.PackRequest(**fields)
        return self._call("POST", "/v1/context", m.Pack, req)

    def manifest(self, pack_id: str) -> m.Manifest:
        """``GET /v1/context/{id}``."""
        return self._call("GET", f"/v1/context/{_seg(pack_id)}", m.Manifest)

    def replay(self, pack_id: str) -> m.Replay:
        """``POST /v1/context/{id}/replay``: the stored request compiled again now, and the
        difference item by item."""
        return self._call("POST", f"/v1/context/{_seg(pack_id)}/replay", m.Replay)


class Tasks(_Api):
    """The working layer: tasks, their append-only event log, artifacts read by range,
    compaction summaries, checkpoints and the Continuation Package."""

    def create(self, request: Optional[m.CreateTask] = None, **fields: Any) -> m.TaskView:
        """``POST /v1/tasks``."""
        req = request or m.CreateTask(**fields)
        return self._call("POST", "/v1/tasks", m.TaskView, req)

    def get(self, task_id: str) -> m.TaskView:
        """``GET /v1/tasks/{id}``."""
        return self._call("GET", f"/v1/tasks/{_seg(task_id)}", m.TaskView)

    def list(self, *, limit: Optional[int] = None) -> m.TaskList:
        """``GET /v1/tasks``."""
        return self._call("GET", "/v1/tasks", m.TaskList, params={"limit": limit})

    def update(self, task_id: str, version: int, **fields: Any) -> m.TaskView:
        """``PATCH /v1/tasks/{id}`` from the head ``version`` read (another: ``CONFLICT``)."""
        req = m.UpdateTask(version=version, **fields)
        return self._call("PATCH", f"/v1/tasks/{_seg(task_id)}", m.TaskView, req)

    def delete(self, task_id: str, *, reason: Optional[str] = None) -> m.Receipt:
        """``DELETE /v1/tasks/{id}``: events, artifacts and summaries purged, with the receipt."""
        return self._call(
            "DELETE", f"/v1/tasks/{_seg(task_id)}", m.Receipt, params={"reason": reason}
        )

    def append(
        self, task_id: str, events: list[Union[m.EventInput, dict[str, Any]]]
    ) -> m.AppendOutcome:
        """``POST /v1/tasks/{id}/events``: an event id appended before counts once."""
        req = m.AppendEvents(
            events=[e if isinstance(e, m.EventInput) else m.EventInput(**e) for e in events]
        )
        return self._call("POST", f"/v1/tasks/{_seg(task_id)}/events", m.AppendOutcome, req)

    def events(
        self, task_id: str, *, after: int = 0, limit: Optional[int] = None
    ) -> m.EventPage:
        """``GET /v1/tasks/{id}/events?after=&limit=``."""
        return self._call(
            "GET",
            f"/v1/tasks/{_seg(task_id)}/events",
            m.EventPage,
            params={"after": after, "limit": limit},
        )

    def put_artifact(
        self,
        task_id: str,
        name: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        summary: Optional[str] = None,
    ) -> m.ArtifactView:
        """``PUT /v1/tasks/{id}/artifacts/{name}`` with the raw bytes."""
        r = self._http.put(
            f"/v1/tasks/{_seg(task_id)}/artifacts/{_seg(name)}",
            content=data,
            headers={"Content-Type": media_type},
            params={"summary": summary} if summary is not None else None,
        )
        self._raise_for(r)
        return m.ArtifactView.model_validate(r.json())

    def artifacts(self, task_id: str) -> m.ArtifactList:
        """``GET /v1/tasks/{id}/artifacts``."""
        return self._call("GET", f"/v1/tasks/{_seg(task_id)}/artifacts", m.ArtifactList)

    def read_range(
        self,
        artifact_id: str,
        *,
        offset: Optional[int] = None,
        length: Optional[int] = None,
        line: Optional[int] = None,
        lines: Optional[int] = None,
    ) -> bytes:
        """``GET /v1/artifacts/{id}``: exactly the bytes ``offset .. offset + length``, or
        exactly the lines ``line ..`` (counted from 1, each with its line feed)."""
        params = {"offset": offset, "length": length, "line": line, "lines": lines}
        r = self._http.get(
            f"/v1/artifacts/{_seg(artifact_id)}",
            params={k: v for k, v in params.items() if v is not None},
        )
        self._raise_for(r)
        return r.content

    def summarize(self, task_id: str, from_seq: int, to_seq: int, content: str) -> m.TaskMark:
        """``POST /v1/tasks/{id}/summaries``: the range is checked, its hash recorded."""
        req = m.SummaryRequest(from_seq=from_seq, to_seq=to_seq, content=content)
        return self._call("POST", f"/v1/tasks/{_seg(task_id)}/summaries", m.TaskMark, req)

    def checkpoint(
        self, task_id: str, *, seq: Optional[int] = None, label: Optional[str] = None
    ) -> m.TaskMark:
        """``POST /v1/tasks/{id}/checkpoints`` (default: the last event)."""
        req = m.CheckpointRequest(seq=seq, label=label)
        return self._call("POST", f"/v1/tasks/{_seg(task_id)}/checkpoints", m.TaskMark, req)

    def marks(self, task_id: str) -> m.MarkList:
        """``GET /v1/tasks/{id}/marks``."""
        return self._call("GET", f"/v1/tasks/{_seg(task_id)}/marks", m.MarkList)

    def continuation(
        self, task_id: str, budget: int, *, checkpoint: Optional[str] = None
    ) -> m.Continuation:
        """``POST /v1/tasks/{id}/continuation``: deterministic, within ``budget`` tokens."""
        req = m.ContinuationRequest(budget=budget, checkpoint=checkpoint)
        return self._call(
            "POST", f"/v1/tasks/{_seg(task_id)}/continuation", m.Continuation, req
        )


class Registry:
    """A client bound to one server and one API key.

    ``project``, ``session``, ``task`` and ``purpose`` set the context headers, which only
    narrow what the key may see."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        project: Optional[str] = None,
        session: Optional[str] = None,
        task: Optional[str] = None,
        purpose: Optional[str] = None,
        timeout: float = 30.0,
        transport: Optional[httpx.BaseTransport] = None,
    ):
        headers = {"Authorization": f"Bearer {api_key}"}
        for name, v in (
            ("X-Project", project),
            ("X-Session", session),
            ("X-Task", task),
            ("X-Purpose", purpose),
        ):
            if v is not None:
                headers[name] = v
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self.memory = Memory(self._http)
        self.knowledge = Knowledge(self._http)
        self.skills = Skills(self._http)
        self.context = Context(self._http)
        self.assets = Assets(self._http)
        self.tasks = Tasks(self._http)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
