#!/usr/bin/env bash
# docker-compose with Runbox's compose file: installs Debian's docker-compose when neither it
# nor `docker compose` is there, then passes every argument on, e.g.
#   deploy/compose/compose.sh up -d
#   deploy/compose/compose.sh -p staging --env-file staging.env down
# Options before the command (-p, --env-file) go to compose as usual.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

file="$RUNBOX_ROOT/deploy/compose/compose.yaml"
if have docker-compose; then
  exec docker-compose -f "$file" "$@"
elif docker compose version >/dev/null 2>&1; then
  exec docker compose -f "$file" "$@"
fi
apt_install docker-compose
exec docker-compose -f "$file" "$@"
