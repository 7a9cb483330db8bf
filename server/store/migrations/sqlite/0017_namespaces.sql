-- Namespaces. Each namespace but `default` keeps its data in a database file of its own beside
-- this one (<name of this file>.<namespace>.db), so no query of one namespace can see another's
-- rows; `default` is this file, where everything written before namespaces existed already is.
-- This table, read only in this file, lists the namespaces.
CREATE TABLE namespaces (
    name       TEXT PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO namespaces (name, created_at) VALUES ('default', CAST(unixepoch('subsec') * 1000 AS INTEGER));
