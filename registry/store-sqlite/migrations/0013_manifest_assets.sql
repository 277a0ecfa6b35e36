-- 0013: context manifests keep the request they were compiled from (for replay), and an index
-- of the assets each included (for change impact). Released migrations are never edited; add a
-- new numbered file instead.

-- The caller's request (goal, query, rules): never served, erased with its manifest.
ALTER TABLE context_manifests ADD COLUMN request TEXT;

-- Which manifests included an asset: the item itself and what it was cut from (a chunk's
-- document). Ids only.
CREATE TABLE manifest_assets (
    asset_id    TEXT NOT NULL,
    manifest_id TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    principal   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (asset_id, manifest_id)
) WITHOUT ROWID;
CREATE INDEX manifest_assets_by_manifest ON manifest_assets (manifest_id);

-- The index goes with its manifest, whichever way the manifest is deleted.
CREATE TRIGGER context_manifests_erase_assets AFTER DELETE ON context_manifests
BEGIN
    DELETE FROM manifest_assets WHERE manifest_id = OLD.id;
END;
