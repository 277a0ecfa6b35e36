-- 0003: job runs, and the mutable usage counters of memory records.
-- Released migrations are never edited; add a new numbered file instead.

-- One row per job run. A run killed midway stays `running`; the next run of the same job
-- starts from the last run that finished `ok`.
CREATE TABLE job_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    outcome     TEXT NOT NULL,
    counts      TEXT,
    error       TEXT
);
CREATE INDEX job_runs_name ON job_runs (name, started_at);

-- Counters that change without changing a memory's content (so they make no new version).
CREATE TABLE memory_stats (
    id             TEXT PRIMARY KEY,
    usage_count    INTEGER NOT NULL DEFAULT 0,
    last_retrieved TEXT,
    last_verified  TEXT,
    helpful        INTEGER NOT NULL DEFAULT 0,
    harmful        INTEGER NOT NULL DEFAULT 0,
    decay_weight   REAL    NOT NULL DEFAULT 1.0
) WITHOUT ROWID;
