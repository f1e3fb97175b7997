# The memgov command line, installed from this repository (the one-shot `memgov` service of
# docker-compose.yml; also usable as `docker run --rm memgov-pg:latest memgov status --dsn ...`).
FROM python:3.11-slim-bookworm
WORKDIR /src
COPY pyproject.toml README.md LICENSE CHANGELOG.md alembic.ini ./
COPY memgov_pg ./memgov_pg
COPY sql ./sql
COPY alembic ./alembic
COPY policies ./policies
COPY docker ./docker
RUN pip install --no-cache-dir . && rm -rf /src
COPY docker/memgov-init.sh /usr/local/bin/memgov-init
WORKDIR /
CMD ["memgov-init"]
