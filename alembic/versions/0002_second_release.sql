-- The second release: only what changed since 0001_initial. Tables, indexes,
-- triggers and row security are written here by hand; the routines that changed
-- are written by scripts/revision-sql into the generated blocks.

-- migrate:upgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
-- generated routines: end

-- migrate:downgrade
-- generated routines: begin (scripts/revision-sql; do not edit)
-- generated routines: end
