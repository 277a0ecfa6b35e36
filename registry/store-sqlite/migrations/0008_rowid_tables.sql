-- 0008: the tables whose rows are large (assets: meta + body, often over a page; context
-- manifests; idempotent responses) become rowid tables with their primary key as a unique
-- index. In a WITHOUT ROWID table the whole row is the b-tree's key: every comparison on the
-- way down to a row read that row's overflow pages into a buffer, so fetching 200 memories by
-- id among a million read megabytes. Now the key index holds only the key columns and the row
-- is read once, at its leaf. Same columns, constraints, indexes and triggers as before.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE assets_0008 (
    id           TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    tenant       TEXT,
    scope_key    TEXT    NOT NULL,
    owner        TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    lookup_key   TEXT,
    content_hash TEXT    NOT NULL,
    created_at   TEXT    NOT NULL,
    expires_at   TEXT,
    is_head      INTEGER NOT NULL,
    meta         TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    retain_until TEXT,
    PRIMARY KEY (id, version)
);
INSERT INTO assets_0008 (id, version, kind, tenant, scope_key, owner, status, lookup_key,
        content_hash, created_at, expires_at, is_head, meta, body, retain_until)
    SELECT id, version, kind, tenant, scope_key, owner, status, lookup_key, content_hash,
           created_at, expires_at, is_head, meta, body, retain_until
      FROM assets ORDER BY id, version;
DROP TABLE assets;
ALTER TABLE assets_0008 RENAME TO assets;

CREATE INDEX assets_head_lookup ON assets (kind, tenant, lookup_key) WHERE is_head = 1;
CREATE INDEX assets_scope ON assets (kind, scope_key, status);
CREATE INDEX assets_hash ON assets (content_hash);
CREATE INDEX assets_owner ON assets (tenant, owner);
CREATE INDEX assets_expiry ON assets (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX assets_created ON assets (created_at);
CREATE INDEX assets_retention ON assets (retain_until) WHERE retain_until IS NOT NULL;

-- Versions are immutable: only status and the head flag may move.
CREATE TRIGGER assets_immutable BEFORE UPDATE OF id, version, kind, tenant, scope_key, owner,
    lookup_key, content_hash, created_at, expires_at, retain_until, meta, body ON assets
BEGIN
    SELECT RAISE(ABORT, 'asset versions are immutable');
END;

CREATE TABLE context_manifests_0008 (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    principal  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    manifest   TEXT NOT NULL
);
INSERT INTO context_manifests_0008 (id, tenant, principal, created_at, manifest)
    SELECT id, tenant, principal, created_at, manifest FROM context_manifests ORDER BY id;
DROP TABLE context_manifests;
ALTER TABLE context_manifests_0008 RENAME TO context_manifests;
CREATE INDEX context_manifests_owner ON context_manifests (tenant, principal);

-- A manifest records what a model was shown; it is never rewritten.
CREATE TRIGGER context_manifests_immutable BEFORE UPDATE ON context_manifests
BEGIN
    SELECT RAISE(ABORT, 'context manifests are immutable');
END;

CREATE TABLE idempotency_0008 (
    tenant       TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    response     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
);
INSERT INTO idempotency_0008 (tenant, key, request_hash, response, created_at)
    SELECT tenant, key, request_hash, response, created_at FROM idempotency ORDER BY tenant, key;
DROP TABLE idempotency;
ALTER TABLE idempotency_0008 RENAME TO idempotency;
