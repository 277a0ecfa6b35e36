-- 0001: governed assets, derivation graph, audit log, idempotency, API keys.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE assets (
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
    PRIMARY KEY (id, version)
) WITHOUT ROWID;

CREATE INDEX assets_head_lookup ON assets (kind, tenant, lookup_key) WHERE is_head = 1;
CREATE INDEX assets_scope ON assets (kind, scope_key, status);
CREATE INDEX assets_hash ON assets (content_hash);
CREATE INDEX assets_owner ON assets (tenant, owner);
CREATE INDEX assets_expiry ON assets (expires_at) WHERE expires_at IS NOT NULL;

-- Versions are immutable: only status and the head flag may move.
CREATE TRIGGER assets_immutable BEFORE UPDATE OF id, version, kind, tenant, scope_key, owner,
    lookup_key, content_hash, created_at, expires_at, meta, body ON assets
BEGIN
    SELECT RAISE(ABORT, 'asset versions are immutable');
END;

CREATE TABLE derivation (
    parent      TEXT NOT NULL,
    child       TEXT NOT NULL,
    relation    TEXT NOT NULL,
    child_store TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (parent, child, relation, child_store)
) WITHOUT ROWID;
CREATE INDEX derivation_child ON derivation (child);

CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY,
    at          TEXT NOT NULL,
    actor       TEXT NOT NULL,
    tenant      TEXT,
    action      TEXT NOT NULL,
    asset_id    TEXT,
    before_hash TEXT,
    after_hash  TEXT,
    reason      TEXT,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL
);
CREATE INDEX audit_asset ON audit (asset_id);

-- Append-only. (A tamperer with file access can drop these; the hash chain still tells.)
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TABLE idempotency (
    tenant       TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    response     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    key_hash   TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    groups     TEXT NOT NULL,
    roles      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
