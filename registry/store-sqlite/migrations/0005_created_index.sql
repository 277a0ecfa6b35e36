-- 0005: find versions by creation time (start-up re-indexing of recent memory writes).
-- Released migrations are never edited; add a new numbered file instead.
CREATE INDEX assets_created ON assets (created_at);
