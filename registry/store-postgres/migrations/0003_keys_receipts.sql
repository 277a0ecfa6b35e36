-- 0003: idempotency records, API keys and deletion receipts.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE idempotency (
    tenant       text COLLATE "C" NOT NULL,
    key          text COLLATE "C" NOT NULL,
    request_hash text             NOT NULL,
    response     json             NOT NULL,
    created_at   timestamptz      NOT NULL,
    PRIMARY KEY (tenant, key)
);

-- Only the sha256 of a key's secret is kept.
CREATE TABLE api_keys (
    id         text COLLATE "C" PRIMARY KEY,
    key_hash   text             NOT NULL UNIQUE,
    tenant     text             NOT NULL,
    user_name  text             NOT NULL,
    groups     json             NOT NULL,
    roles      json             NOT NULL,
    -- Issued by the operator for the platform: governs the global scope.
    platform   boolean          NOT NULL,
    projects   json             NOT NULL,
    clearance  text             NOT NULL,
    created_at timestamptz      NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);

-- Deletion receipts: ids and content hashes only, never content.
CREATE TABLE receipts (
    id         text COLLATE "C" PRIMARY KEY,
    tenant     text,
    status     text             NOT NULL,
    created_at timestamptz      NOT NULL,
    updated_at timestamptz      NOT NULL,
    receipt    json             NOT NULL
);
CREATE INDEX receipts_status ON receipts (status, created_at);
