-- 0001: governed assets and the derivation graph.
-- Released migrations are never edited; add a new numbered file instead.
--
-- Identifiers that are ordered or paged on use the C collation whatever the database's default
-- is, so that `find` pages in byte order as the SQLite store does.

-- Raises the message given as the trigger's argument: the guard of append-only and immutable
-- tables. (A role that owns the tables can disable it; the keyed audit chain still tells.)
CREATE FUNCTION registry_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END
$$;

CREATE TABLE assets (
    id           text COLLATE "C" NOT NULL,
    version      bigint           NOT NULL CHECK (version BETWEEN 1 AND 4294967295),
    kind         text             NOT NULL,
    tenant       text,
    scope_key    text             NOT NULL,
    owner        text             NOT NULL,
    status       text             NOT NULL,
    lookup_key   text,
    content_hash text             NOT NULL,
    created_at   timestamptz      NOT NULL,
    expires_at   timestamptz,
    retain_until timestamptz,
    is_head      boolean          NOT NULL,
    -- The first image of the metadata and the body, as JSON text (`json`, not `jsonb`: kept
    -- byte for byte, and a string may hold \u0000).
    meta         json             NOT NULL,
    body         json             NOT NULL,
    PRIMARY KEY (id, version)
);

-- At most one head per asset.
CREATE UNIQUE INDEX assets_one_head ON assets (id) WHERE is_head;
CREATE INDEX assets_head_lookup ON assets (kind, tenant, lookup_key) WHERE is_head;
CREATE INDEX assets_scope ON assets (kind, scope_key, status);
CREATE INDEX assets_hash ON assets (content_hash);
CREATE INDEX assets_owner ON assets (tenant, owner);
CREATE INDEX assets_expiry ON assets (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX assets_retention ON assets (retain_until) WHERE retain_until IS NOT NULL;
-- `find`'s order and its `after` cursor.
CREATE INDEX assets_created ON assets (created_at, id, version);

-- Versions are immutable: only status and the head flag may move.
CREATE TRIGGER assets_immutable
    BEFORE UPDATE OF id, version, kind, tenant, scope_key, owner, lookup_key, content_hash,
        created_at, expires_at, retain_until, meta, body
    ON assets FOR EACH ROW EXECUTE FUNCTION registry_refuse('asset versions are immutable');

CREATE TABLE derivation (
    parent      text COLLATE "C" NOT NULL,
    child       text COLLATE "C" NOT NULL,
    relation    text             NOT NULL,
    child_store text             NOT NULL,
    created_at  timestamptz      NOT NULL,
    PRIMARY KEY (parent, child, relation, child_store)
);
CREATE INDEX derivation_child ON derivation (child);
