-- A fork's lineage: the workflow it was forked from, and the step position it ran on from
-- (the source's steps before it were copied into the fork).
ALTER TABLE workflows ADD COLUMN forked_from TEXT;
ALTER TABLE workflows ADD COLUMN forked_from_step BIGINT;
