-- 0010: the working layer (issue 33). A task is an asset (kind `task`); its event log,
-- artifacts and marks (compaction summaries, checkpoints) live here, keyed by the task's id,
-- and a purge of the task deletes them in the same transaction.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE task_events (
    task         TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    client_id    TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    at           TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    artifact     TEXT,
    caused_by    TEXT,
    flags        TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    PRIMARY KEY (task, seq)
);
CREATE UNIQUE INDEX task_events_client ON task_events (task, client_id);
CREATE INDEX task_events_kind ON task_events (task, kind, seq);

-- Append-only: an event is never rewritten (a purge of its task deletes it).
CREATE TRIGGER task_events_immutable BEFORE UPDATE ON task_events
BEGIN
    SELECT RAISE(ABORT, 'task events are append-only');
END;

CREATE TABLE task_artifacts (
    id         TEXT    PRIMARY KEY,
    task       TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    blob_key   TEXT    NOT NULL,
    digest     TEXT    NOT NULL,
    size       INTEGER NOT NULL,
    lines      INTEGER NOT NULL,
    media_type TEXT    NOT NULL,
    summary    TEXT,
    created_at TEXT    NOT NULL
);
CREATE INDEX task_artifacts_task ON task_artifacts (task, created_at);
CREATE INDEX task_artifacts_blob ON task_artifacts (blob_key);

CREATE TABLE task_marks (
    id           TEXT    PRIMARY KEY,
    task         TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    from_seq     INTEGER NOT NULL,
    to_seq       INTEGER NOT NULL,
    covered_hash TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    created_at   TEXT    NOT NULL
);
CREATE INDEX task_marks_task ON task_marks (task, kind, to_seq);
