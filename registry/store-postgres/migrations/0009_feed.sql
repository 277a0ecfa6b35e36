-- 0009: webhooks of the change feed and their deliveries. The feed itself is the audit log
-- (see registry_core::feed); these tables hold only where each webhook stands in it. Every
-- node reads the same rows: a cursor moves by compare-and-set and a delivery is claimed with
-- FOR UPDATE SKIP LOCKED and a lease, so each is sent once across nodes.
-- Released migrations are never edited; add a new numbered file instead.

CREATE TABLE webhooks (
    id         text        PRIMARY KEY,
    tenant     text        NOT NULL,
    owner      text        NOT NULL,
    key_id     text        NOT NULL,
    url        text        NOT NULL,
    events     json        NOT NULL,
    -- The secret is derived from the server's key and this salt; it is never stored.
    salt       text        NOT NULL,
    cursor     bigint      NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant);

CREATE TABLE webhook_deliveries (
    id          text        PRIMARY KEY,
    webhook_id  text        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    seq         bigint      NOT NULL,
    kind        text        NOT NULL,
    status      text        NOT NULL,
    attempts    integer     NOT NULL,
    next_at     timestamptz NOT NULL,
    lease_until timestamptz,
    last_error  text,
    updated_at  timestamptz NOT NULL,
    UNIQUE (webhook_id, seq)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_at);
