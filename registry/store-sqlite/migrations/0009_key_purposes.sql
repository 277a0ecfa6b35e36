-- 0009: purposes are bound to keys. `X-Purpose` only narrows within the key's purposes, as
-- `X-Project` does within its projects. Released migrations are never edited; add a new file.

-- Keys made before this migration: admin keys hold every purpose (what `keys create` gives a
-- new admin key); the others hold none, so they read no purpose-restricted asset until the
-- operator issues them a key with `--purpose`.
ALTER TABLE api_keys ADD COLUMN purposes TEXT NOT NULL DEFAULT '[]';
UPDATE api_keys SET purposes = '["*"]' WHERE roles LIKE '%"admin"%';
