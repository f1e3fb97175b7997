#!/bin/sh
# The one-shot `memgov` service of docker-compose.yml: every step is idempotent, so
# `docker compose up` may run it again on an existing database.
set -eu
memgov migrate
memgov deploy "${MEMGOV_POLICY:-default}"
memgov retention schedule
