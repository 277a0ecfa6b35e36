-- 0011: webhooks of the change feed and their deliveries. The feed itself is the audit log
-- (see registry_core::feed); these tables hold only where each webhook stands in it.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE webhooks (
    id         TEXT    PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    key_id     TEXT    NOT NULL,
    url        TEXT    NOT NULL,
    events     TEXT    NOT NULL,
    -- The secret is derived from the server's key and this salt; it is never stored.
    salt       TEXT    NOT NULL,
    cursor     INTEGER NOT NULL,
    created_at TEXT    NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant);

CREATE TABLE webhook_deliveries (
    id          TEXT    PRIMARY KEY,
    webhook_id  TEXT    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    -- Unix microseconds, so that due rows compare as numbers.
    next_at     INTEGER NOT NULL,
    lease_until INTEGER,
    last_error  TEXT,
    updated_at  TEXT    NOT NULL,
    UNIQUE (webhook_id, seq)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_at);
