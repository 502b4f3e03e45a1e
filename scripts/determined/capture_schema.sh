#!/usr/bin/env bash
# Capture Determined 0.38.1's database schema as a test fixture.
#
# Applies Determined's own SQL migrations (master/static/migrations at the v0.38.1 tag), in
# file-name order, to a fresh PostgreSQL database, then writes `pg_dump --schema-only` to
# tests/fixtures/determined_db/schema-0.38.1.sql (with the rows the migrations insert). Tests load that dump (fast), never the
# migrations.
#
# Usage: scripts/determined/capture_schema.sh GIT_DIR [PGURL_BASE]
#   GIT_DIR     a clone (or bare mirror) of github.com/determined-ai/determined
#   PGURL_BASE  libpq connection options for the server (default: -h 127.0.0.1 -U postgres)
set -euo pipefail

GIT_DIR=${1:?usage: capture_schema.sh GIT_DIR}
TAG=v0.38.1
DB=stalwart_det_capture_$$
PGOPTS=(${PGURL_BASE:--h 127.0.0.1 -U postgres})
HERE=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$HERE/tests/fixtures/determined_db/schema-0.38.1.sql

createdb "${PGOPTS[@]}" "$DB"
trap 'dropdb "${PGOPTS[@]}" --if-exists "$DB"' EXIT
PSQL=(psql "${PGOPTS[@]}" -d "$DB" -q -v ON_ERROR_STOP=1)
# go-pg's bookkeeping table: migration 20240407235703_oss-to-ee-catch-up reads it.
"${PSQL[@]}" -c 'CREATE TABLE gopg_migrations (id serial PRIMARY KEY, version bigint, created_at timestamptz DEFAULT now());'

count=0
for path in $(git -C "$GIT_DIR" ls-tree --name-only "$TAG" master/static/migrations/ | grep '\.up\.sql$' | sort); do
    name=$(basename "$path")
    version=${name%%_*}
    git -C "$GIT_DIR" show "$TAG:$path" | "${PSQL[@]}" -f - >/dev/null
    "${PSQL[@]}" -c "INSERT INTO gopg_migrations(version) VALUES ($version);"
    count=$((count + 1))
done
echo "applied $count migrations" >&2

commit=$(git -C "$GIT_DIR" rev-parse "$TAG^{commit}")
{
    echo "-- Determined $TAG database schema, captured by scripts/determined/capture_schema.sh"
    echo "-- Source: https://github.com/determined-ai/determined, tag $TAG, commit $commit,"
    echo "-- master/static/migrations (*.up.sql, $count files, applied in file-name order)."
    echo "-- Captured $(date -u +%Y-%m-%d) on $(psql "${PGOPTS[@]}" -d "$DB" -Atc 'SHOW server_version' | cut -d' ' -f1)."
    echo "-- This is Determined's data, under its license (Apache License 2.0,"
    echo "-- Copyright 2017-2024 Determined.ai, Inc.); see README.md next to this file."
    pg_dump "${PGOPTS[@]}" --schema-only --no-owner --no-privileges "$DB" \
        | grep -v '^SELECT pg_catalog.set_config' | grep -v '^\\restrict' | grep -v '^\\unrestrict'
    # The rows the migrations themselves write (the built-in users, workspace and project 1,
    # roles, go-pg's records), as INSERTs so any client can load the file.
    echo "-- The rows Determined's migrations write."
    pg_dump "${PGOPTS[@]}" --data-only --inserts --no-owner --no-privileges "$DB" \
        | grep -v '^SELECT pg_catalog.set_config' | grep -v '^\\restrict' | grep -v '^\\unrestrict'
} >"$OUT"
echo "wrote $OUT" >&2
