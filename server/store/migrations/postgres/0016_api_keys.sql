-- API keys. A key is wmk_<key_id>_<secret>; only the key id and a SHA-256 hash of the secret are
-- kept, so the key cannot be read back from the database. Secrets are 256 random bits, which is
-- why a fast hash is enough (no password stretching: nothing to guess). The server caches what
-- it verifies for a few seconds, so a call costs no round trip here; a revocation is seen by
-- every replica when its cache entry ends.
CREATE TABLE api_keys (
    key_id        TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    secret_sha256 TEXT NOT NULL,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    -- JSON arrays of text: the namespaces the key acts in ("*": every one) and, for a worker
    -- key, the workflow and step names it may register (empty: any).
    namespaces    TEXT NOT NULL,
    name_patterns TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    revoked_at    BIGINT
);
