#!/bin/sh
# The one-shot `memgov` service of docker-compose.yml: every step is idempotent, so
# `docker compose up` may run it again on an existing database.
set -eu
# --wait: the healthcheck may pass a moment before the server accepts this container's connections
memgov migrate --wait "${MEMGOV_WAIT:-60}"
memgov deploy "${MEMGOV_POLICY:-default}"
memgov retention schedule
