-- 0004: the operational tables beside the assets: job runs, context manifests, usage counters
-- and votes (the SQLite store's 0003, 0004 and 0006 parts of the same name).
-- Released migrations are never edited; add a new numbered file instead.

-- One row per job run. A run killed midway stays `running`; the next run of the same job
-- starts from the last run that finished `ok`.
CREATE TABLE job_runs (
    id          bigserial   PRIMARY KEY,
    name        text        NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    outcome     text        NOT NULL,
    counts      json,
    error       text
);
CREATE INDEX job_runs_name ON job_runs (name, started_at);

-- A manifest holds ids, scopes, versions, token counts and content hashes of what a context
-- pack included or left out, never the content itself. It is never rewritten (erased with its
-- principal: DELETE stays allowed).
CREATE TABLE context_manifests (
    id         text COLLATE "C" PRIMARY KEY,
    tenant     text             NOT NULL,
    principal  text             NOT NULL,
    created_at timestamptz      NOT NULL,
    manifest   json             NOT NULL
);
CREATE INDEX context_manifests_owner ON context_manifests (tenant, principal, created_at);
CREATE TRIGGER context_manifests_immutable BEFORE UPDATE ON context_manifests
    FOR EACH ROW EXECUTE FUNCTION registry_refuse('context manifests are immutable');

-- Counters that change without changing a memory's content (so they make no new version).
CREATE TABLE memory_stats (
    id             text COLLATE "C" PRIMARY KEY,
    usage_count    bigint           NOT NULL DEFAULT 0,
    last_retrieved timestamptz,
    last_verified  timestamptz,
    helpful        bigint           NOT NULL DEFAULT 0,
    harmful        bigint           NOT NULL DEFAULT 0,
    decay_weight   double precision NOT NULL DEFAULT 1.0,
    -- Why it waits for a reviewer while it stays served.
    review         text
);
CREATE INDEX memory_stats_review ON memory_stats (id) WHERE review IS NOT NULL;

-- One vote per principal and memory; the counters in memory_stats are the sums of these.
CREATE TABLE memory_votes (
    id      text COLLATE "C" NOT NULL,
    voter   text COLLATE "C" NOT NULL,
    helpful boolean          NOT NULL,
    at      timestamptz      NOT NULL,
    PRIMARY KEY (id, voter)
);
