-- 0005: the change log that the nodes sharing this database follow, and the nodes themselves.
-- Released migrations are never edited; add a new numbered file instead.

-- One row per asset changed by a commit (a new version, a status move, a purge), written in
-- the same transaction under the write lock, so `seq` grows in commit order. Asset ids only,
-- never content: a node re-reads the asset from the store (or finds it gone).
CREATE TABLE changes (
    seq      bigserial        PRIMARY KEY,
    asset_id text COLLATE "C" NOT NULL,
    -- The node whose write it was (that node applied it to its own indexes at once).
    node     text,
    at       timestamptz      NOT NULL DEFAULT now()
);

-- How far the log was pruned: a node that applied less rebuilds its indexes from the store.
CREATE TABLE change_log_state (
    id             integer PRIMARY KEY CHECK (id = 1),
    pruned_through bigint  NOT NULL
);
INSERT INTO change_log_state (id, pruned_through) VALUES (1, 0);

-- Each node following the log: how far its indexes are, and when it last said so.
CREATE TABLE nodes (
    node        text COLLATE "C" PRIMARY KEY,
    applied_seq bigint           NOT NULL,
    seen_at     timestamptz      NOT NULL,
    started_at  timestamptz      NOT NULL
);
