#!/usr/bin/env bash
# Installs (where it can) and starts the infrastructure Runbox needs on this host:
# PostgreSQL, NATS with JetStream and the Docker engine. Idempotent: whatever already
# answers is left alone, so a second call returns in well under a second.
#
#   scripts/infra.sh up     install what is missing, start what is down
#   scripts/infra.sh down   stop what this script started (by the pids it recorded)
#   scripts/infra.sh test-tools   install what only the tests use (LibreOffice, Ghostscript,
#                                 OpenSSH's server, util-linux's script)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PG_PORT="${RUNBOX_PG_PORT:-5432}"
NATS_PORT="${RUNBOX_NATS_PORT:-4222}"
PG_USER=runbox
PG_PASSWORD=runbox
PG_DB=runbox
PIDS="$RUNBOX_STATE_DIR/pids"
mkdir -p "$PIDS" "$RUNBOX_STATE_DIR/logs"

docker_up() { curl -sf --unix-socket /var/run/docker.sock http://localhost/_ping >/dev/null 2>&1; }
nats_up() { (exec 3<>"/dev/tcp/127.0.0.1/$NATS_PORT") 2>/dev/null; }
pg_up() { pg_isready -q -h 127.0.0.1 -p "$PG_PORT"; }

ensure_packages() {
  local missing=()
  have curl || missing+=(curl)
  have pg_ctlcluster || missing+=(postgresql)
  have nats-server || missing+=(nats-server)
  have dockerd || missing+=(docker.io)
  # losetup: the tests look at the loop devices behind workspace disks (the executor itself
  # needs nothing on the host; the engine's helper containers do the work).
  have losetup || missing+=(mount)
  # The browser tool drives Debian's Chromium (playwright's own browser download needs a
  # host that is not reachable from every install).
  have chromium || missing+=(chromium)
  # debootstrap is not needed up front: deploy/sandbox/build.sh installs it only when no
  # container registry answers and it has to build the sandbox base itself.
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}

# Tools only the test suite uses: LibreOffice and Ghostscript make the PDFs the file tools'
# tests read (real fonts, ToUnicode maps, a scanned page with no text layer).
ensure_test_packages() {
  local missing=()
  have soffice || missing+=(libreoffice-writer-nogui)
  have gs || missing+=(ghostscript)
  # `script` gives the CLI tests a pseudo-terminal (interactive approvals).
  have script || missing+=(bsdutils)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  ensure_sshd
}

# The SSH tests start their own sshd on a loopback port with a config in a temp dir. Debian's
# package would start a system-wide sshd on port 22 as it installs; a policy-rc.d that refuses
# service starts (the distribution's own mechanism) keeps it from doing so.
ensure_sshd() {
  [ -x /usr/sbin/sshd ] && have ssh-keygen && return 0
  local policy=/usr/sbin/policy-rc.d placed=0
  if is_root && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && placed=1
  fi
  apt_install openssh-server
  [ "$placed" = 0 ] || rm -f "$policy"
}

# Workspace disks are loop devices (docs/sandbox.md#workspace-size); where the loop driver is
# a module it may not be loaded yet.
ensure_loop_devices() {
  [ -e /dev/loop-control ] && return 0
  is_root && modprobe loop 2>/dev/null && [ -e /dev/loop-control ] && return 0
  warn "no loop devices on this host (/dev/loop-control): sandboxes cannot get size-limited workspaces; load the loop module, or set RUNBOX_SANDBOX_DISK_MB=0 to run without a limit"
}

start_docker() {
  ensure_loop_devices
  docker_up && return 0
  is_root || die "the Docker engine is not running; start it (sudo systemctl start docker) or run ./runbox up as root"
  log "starting dockerd"
  setsid dockerd >"$RUNBOX_STATE_DIR/logs/dockerd.log" 2>&1 < /dev/null &
  echo $! >"$PIDS/dockerd"
  wait_for "dockerd" 60 docker_up
}

start_nats() {
  nats_up && return 0
  log "starting nats-server (JetStream) on 127.0.0.1:$NATS_PORT"
  mkdir -p "$RUNBOX_STATE_DIR/nats"
  setsid nats-server -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$RUNBOX_STATE_DIR/nats" \
    >"$RUNBOX_STATE_DIR/logs/nats.log" 2>&1 < /dev/null &
  echo $! >"$PIDS/nats"
  wait_for "nats-server" 20 nats_up
}

pg_version() { ls /usr/lib/postgresql | sort -n | tail -1; }

start_postgres() {
  if ! pg_up; then
    is_root || die "PostgreSQL is not running on port $PG_PORT; start it or run ./runbox up as root"
    local v; v=$(pg_version)
    pg_lsclusters -h | awk '{print $2}' | grep -qx main || pg_createcluster "$v" main >/dev/null
    log "starting PostgreSQL $v"
    pg_ctlcluster --skip-systemctl-redirect "$v" main start
    touch "$PIDS/postgres"
    wait_for "PostgreSQL" 30 pg_up
  fi
  if is_root; then
    roles_sql | su postgres -c "psql -qAt -p $PG_PORT" >/dev/null
  else
    check_roles
  fi
}

# Roles (cluster-wide, so made here; the grants and policies are in the migrations):
#   runbox         owns the schema; migrations run as it
#   runbox_app     the services' tenant work: owns nothing, cannot bypass row-level security
#   runbox_system  deployment-wide work (key lookup, admin, sweeps): sees every tenant's
#                  rows only through the explicit system_access policies
# The passwords are for a development machine; see docs/tenancy.md for a deployment.
# Idempotent psql input, run by the PostgreSQL superuser.
roles_sql() {
  cat <<SQL
SELECT 'CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD ''$PG_PASSWORD'''
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER')\gexec
SELECT 'CREATE DATABASE $PG_DB OWNER $PG_USER'
  WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$PG_DB')\gexec
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', r, r) FROM unnest(ARRAY['runbox_app', 'runbox_system']) AS r
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)\gexec
ALTER ROLE runbox_app NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT;
ALTER ROLE runbox_system NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT;
-- The tests drop their databases WITH (FORCE), ending the services' connections to them.
GRANT pg_signal_backend TO $PG_USER;
SQL
}

# Not root, so the roles cannot be made here: when the three connections do not all work,
# stop now with the SQL that makes them, rather than with a migration error later.
check_roles() {
  have psql || return 0
  local url err failed=""
  for url in "${MIGRATION_DATABASE_URL:-postgresql://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB}" \
             "${DATABASE_URL:-postgresql://runbox_app:runbox_app@127.0.0.1:$PG_PORT/$PG_DB}" \
             "${SYSTEM_DATABASE_URL:-postgresql://runbox_system:runbox_system@127.0.0.1:$PG_PORT/$PG_DB}"; do
    if ! err=$(PGCONNECT_TIMEOUT=10 psql -w "$url" -qAtc 'SELECT 1' 2>&1 >/dev/null); then
      failed+="  $(echo "$err" | head -1)"$'\n'
    fi
  done
  [ -z "$failed" ] && return 0
  printf '%s' "$failed" >&2
  warn "PostgreSQL is running, but not every Runbox role can connect (missing, or another password). As its superuser, run:"
  echo "sudo -u postgres psql -p $PG_PORT <<'SQL'" >&2
  roles_sql >&2
  echo "SQL" >&2
  die "then run this again, or run ./runbox as root, which does it itself (these are the development roles; a deployment's are in docs/tenancy.md)"
}

# stop_one NAME: stops one service this script started (nats, dockerd or postgres).
stop_one() {
  local f="$PIDS/$1" pid
  [ -f "$f" ] || return 0
  if [ "$1" = postgres ]; then
    log "stopping PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main stop || true
  else
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping $1 (pid $pid)"
      kill "$pid"
      # dockerd stops its containers first; give it the time it needs.
      for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
  fi
  rm -f "$f"
}

stop_all() {
  stop_one nats
  stop_one dockerd
  stop_one postgres
}

case "${1:-up}" in
  up)
    ensure_packages
    start_postgres
    start_nats
    start_docker
    ;;
  test-tools) ensure_test_packages ;;
  down) stop_all ;;
  stop) stop_one "${2:?usage: $0 stop nats|dockerd|postgres}" ;;
  *) die "usage: $0 up|test-tools|down|stop NAME" ;;
esac
