-- 0002: deletion receipts. Ids and content hashes only, never content.
CREATE TABLE receipts (
    id         TEXT PRIMARY KEY,
    tenant     TEXT,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    receipt    TEXT NOT NULL
);
CREATE INDEX receipts_status ON receipts (status, created_at);
