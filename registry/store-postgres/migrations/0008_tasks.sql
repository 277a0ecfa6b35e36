-- 0008: the working layer (issue 33). A task is an asset (kind `task`); its event log,
-- artifacts and marks (compaction summaries, checkpoints) live here, keyed by the task's id,
-- and a purge of the task deletes them in the same transaction. Same tables as SQLite's 0010.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE task_events (
    task         text        COLLATE "C" NOT NULL,
    seq          bigint      NOT NULL CHECK (seq >= 1),
    client_id    text        COLLATE "C" NOT NULL,
    kind         text        NOT NULL,
    actor        text        NOT NULL,
    at           timestamptz NOT NULL,
    content      text        NOT NULL,
    artifact     text,
    caused_by    text,
    flags        jsonb       NOT NULL,
    content_hash text        NOT NULL,
    PRIMARY KEY (task, seq)
);
CREATE UNIQUE INDEX task_events_client ON task_events (task, client_id);
CREATE INDEX task_events_kind ON task_events (task, kind, seq);

-- Append-only: an event is never rewritten (a purge of its task deletes it).
CREATE TRIGGER task_events_immutable BEFORE UPDATE ON task_events
    FOR EACH ROW EXECUTE FUNCTION registry_refuse('task events are append-only');

CREATE TABLE task_artifacts (
    id         text        COLLATE "C" PRIMARY KEY,
    task       text        COLLATE "C" NOT NULL,
    tenant     text        NOT NULL,
    name       text        NOT NULL,
    blob_key   text        COLLATE "C" NOT NULL,
    digest     text        NOT NULL,
    size       bigint      NOT NULL,
    lines      bigint      NOT NULL,
    media_type text        NOT NULL,
    summary    text,
    created_at timestamptz NOT NULL
);
CREATE INDEX task_artifacts_task ON task_artifacts (task, created_at);
CREATE INDEX task_artifacts_blob ON task_artifacts (blob_key);

CREATE TABLE task_marks (
    id           text        COLLATE "C" PRIMARY KEY,
    task         text        COLLATE "C" NOT NULL,
    kind         text        NOT NULL,
    from_seq     bigint      NOT NULL,
    to_seq       bigint      NOT NULL,
    covered_hash text        NOT NULL,
    content      text        NOT NULL,
    created_at   timestamptz NOT NULL
);
CREATE INDEX task_marks_task ON task_marks (task, kind, to_seq);
