-- 0011: context manifests keep the request they were compiled from (for replay), and an index
-- of the assets each included (for change impact). Released migrations are never edited; add a
-- new numbered file instead.

-- The caller's request (goal, query, rules): never served, erased with its manifest.
ALTER TABLE context_manifests ADD COLUMN request json;

-- Which manifests included an asset: the item itself and what it was cut from (a chunk's
-- document). Ids only; the index goes with its manifest, whichever way it is deleted.
CREATE TABLE manifest_assets (
    asset_id    text COLLATE "C" NOT NULL,
    manifest_id text COLLATE "C" NOT NULL REFERENCES context_manifests (id) ON DELETE CASCADE,
    tenant      text             NOT NULL,
    principal   text             NOT NULL,
    created_at  timestamptz      NOT NULL,
    PRIMARY KEY (asset_id, manifest_id)
);
CREATE INDEX manifest_assets_by_manifest ON manifest_assets (manifest_id);
