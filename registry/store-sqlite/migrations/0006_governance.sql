-- 0006: governance of keys (platform principals, project membership, clearance), retention
-- apart from freshness, the keyed audit chain and its checkpoints, one vote per principal.
-- Released migrations are never edited; add a new numbered file instead.

-- Keys made before this migration keep what they could do: tenant-level access to every
-- sensitivity, no project, no platform rights (the global scope was never meant for tenants).
ALTER TABLE api_keys ADD COLUMN platform INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN projects TEXT NOT NULL DEFAULT '[]';
ALTER TABLE api_keys ADD COLUMN clearance TEXT NOT NULL DEFAULT 'secret';

-- Retention is its own column: `expires_at` means "not served after"; only `retain_until`
-- (and the per-kind retention settings) make the retention job purge. Existing working
-- memories were purged at their TTL, so they keep that; documents are kept, out of answers.
ALTER TABLE assets ADD COLUMN retain_until TEXT;
UPDATE assets SET retain_until = expires_at
 WHERE kind = 'memory' AND expires_at IS NOT NULL AND json_extract(body, '$.class') = 'working';
CREATE INDEX assets_retention ON assets (retain_until) WHERE retain_until IS NOT NULL;

-- Events sealed with the audit key (HMAC) say so; earlier ones are plain sha256.
ALTER TABLE audit ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0;

-- Signed statements of the chain's head.
CREATE TABLE audit_checkpoints (
    seq  INTEGER PRIMARY KEY,
    hash TEXT NOT NULL,
    at   TEXT NOT NULL,
    mac  TEXT NOT NULL
);
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit checkpoints are append-only');
END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit checkpoints are append-only');
END;

-- One vote per principal and memory; the counters in memory_stats are the sums of these.
CREATE TABLE memory_votes (
    id      TEXT NOT NULL,
    voter   TEXT NOT NULL,
    helpful INTEGER NOT NULL,
    at      TEXT NOT NULL,
    PRIMARY KEY (id, voter)
) WITHOUT ROWID;
-- A memory the decay job proposes to retire stays served until a reviewer decides.
ALTER TABLE memory_stats ADD COLUMN review TEXT;
