-- 0004: Context Manifests. A manifest holds ids, scopes, versions, token counts and content
-- hashes of what a context pack included or left out, never the content itself.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE context_manifests (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    principal  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    manifest   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX context_manifests_owner ON context_manifests (tenant, principal);

-- A manifest records what a model was shown; it is never rewritten.
CREATE TRIGGER context_manifests_immutable BEFORE UPDATE ON context_manifests
BEGIN
    SELECT RAISE(ABORT, 'context manifests are immutable');
END;
