# Shared shell helpers for ./runbox and the scripts it calls. Sourced, not run.
# shellcheck shell=bash

RUNBOX_ROOT="${RUNBOX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
RUNBOX_STATE_DIR="${RUNBOX_STATE_DIR:-$RUNBOX_ROOT/.runbox}"
mkdir -p "$RUNBOX_STATE_DIR"

log() { printf '\033[1;34m[runbox]\033[0m %s\n' "$*" >&2; }
warn() { printf '\033[1;33m[runbox]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[runbox]\033[0m %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }
have() { command -v "$1" >/dev/null 2>&1; }

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}

# Where the distribution packages come from differs from the command we need.
apt_install() {
  is_root || die "missing: $* — install them as root: apt-get install -y $*"
  have apt-get || die "missing: $* — this is not a Debian/Ubuntu machine; install them with your package manager"
  if [ ! -f "$RUNBOX_STATE_DIR/.apt-updated" ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
    touch "$RUNBOX_STATE_DIR/.apt-updated"
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || die "apt-get install $* failed"
}
