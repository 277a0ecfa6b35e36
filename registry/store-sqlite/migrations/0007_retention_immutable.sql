-- 0007: `retain_until` (added in 0006) is as immutable as the other columns of a version; the
-- guard of 0001 predates it and let it be edited in place. (Found by the store contract suite,
-- which the PostgreSQL store passes with the column guarded from its first migration.)
-- Released migrations are never edited; add a new numbered file instead.
DROP TRIGGER assets_immutable;
CREATE TRIGGER assets_immutable BEFORE UPDATE OF id, version, kind, tenant, scope_key, owner,
    lookup_key, content_hash, created_at, expires_at, retain_until, meta, body ON assets
BEGIN
    SELECT RAISE(ABORT, 'asset versions are immutable');
END;
