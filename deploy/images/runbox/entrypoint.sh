#!/bin/sh
# gateway | executor | migrate; anything else runs as given (a shell for debugging, say).
set -e
case "${1:-gateway}" in
  gateway) shift; exec node dist/apps/gateway/apps/gateway/src/main.js "$@" ;;
  executor) shift; exec node dist/apps/executor/apps/executor/src/main.js "$@" ;;
  # Migrations run as the schema owner: MIGRATION_DATABASE_URL.
  # The schema file names DATABASE_URL; the migration connection is the owner's.
  migrate) shift; DATABASE_URL="${DATABASE_URL:-${MIGRATION_DATABASE_URL:-}}" exec node scripts/prisma.js migrate deploy "$@" ;;
  *) exec "$@" ;;
esac
