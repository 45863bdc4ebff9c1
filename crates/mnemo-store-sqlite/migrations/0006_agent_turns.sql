-- The agent loop's turn lease: which process runs a session's turn, and until when (the lease
-- lapses if its holder dies, and another process may carry the turn on).
ALTER TABLE sessions ADD COLUMN turn_holder TEXT;
ALTER TABLE sessions ADD COLUMN turn_expires_at INTEGER;
