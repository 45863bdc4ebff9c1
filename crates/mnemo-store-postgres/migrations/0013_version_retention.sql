-- Version retention (issue 35 item 3): a store's own window (`30d`, `forever`), or NULL for the
-- server's `--version-retention`.
ALTER TABLE memory_stores ADD COLUMN version_retention TEXT;
