-- 0006: content-addressed blobs (skill archives) in the shared database, so that every node
-- serves what any node stored. Released migrations are never edited; add a new numbered file.
CREATE TABLE blobs (
    -- Lower-case sha256 hex: of the bytes, or a namespaced key (`namespaced_blob_key`).
    key   text COLLATE "C" PRIMARY KEY CHECK (key ~ '^[0-9a-f]{64}$'),
    bytes bytea            NOT NULL,
    at    timestamptz      NOT NULL DEFAULT now()
);
