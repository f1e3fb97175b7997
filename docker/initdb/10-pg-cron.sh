#!/bin/sh
# CREATE EXTENSION pg_cron in the database pg_cron runs from (cron.database_name).
# The entrypoint's init server is started with the image's command, so pg_cron is already loaded.
set -eu
crondb=$(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -Atc "SHOW cron.database_name")
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$crondb" -c "CREATE EXTENSION IF NOT EXISTS pg_cron"
