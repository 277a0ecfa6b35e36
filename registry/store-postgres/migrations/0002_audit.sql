-- 0002: the append-only, hash-chained audit log, its signed checkpoints, and the row every
-- write transaction locks first.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE audit (
    seq         bigint      PRIMARY KEY CHECK (seq >= 1),
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    tenant      text,
    action      text        NOT NULL,
    asset_id    text,
    before_hash text,
    after_hash  text,
    reason      text,
    prev_hash   text        NOT NULL,
    hash        text        NOT NULL,
    -- Sealed with the store's audit key (HMAC), else plain sha256.
    keyed       boolean     NOT NULL
);
CREATE INDEX audit_asset ON audit (asset_id);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    FOR EACH ROW EXECUTE FUNCTION registry_refuse('the audit log is append-only');
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION registry_refuse('the audit log is append-only');
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION registry_refuse('the audit log is append-only');

-- Signed statements of the chain's head.
CREATE TABLE audit_checkpoints (
    seq  bigint      PRIMARY KEY,
    hash text        NOT NULL,
    at   timestamptz NOT NULL,
    mac  text        NOT NULL
);
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION registry_refuse('audit checkpoints are append-only');
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION registry_refuse('audit checkpoints are append-only');
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION registry_refuse('audit checkpoints are append-only');

-- One row. Every write transaction takes `SELECT ... FOR UPDATE` on it before anything else, so
-- writes serialise across connections and across registry nodes as they do behind SQLite's one
-- writer: the audit chain stays linear, a version is always head + 1, and a status move with
-- `expect` sees the latest committed state. Readers never take it.
CREATE TABLE write_lock (
    id integer PRIMARY KEY CHECK (id = 1)
);
INSERT INTO write_lock (id) VALUES (1);
