#!/usr/bin/env bash
# supervise.sh NAME PIDFILE COMMAND...: runs COMMAND and starts it again whenever it exits,
# with a log line saying how it ended. Restarts back off: 1 s after a quick exit, doubling
# up to 30 s while it keeps exiting, and back to 1 s once it has run for a minute.
# TERM (or INT) stops COMMAND and then the supervisor; so does COMMAND ending by INT (Ctrl-C
# reaches the whole process group). PIDFILE holds COMMAND's current pid.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

[ $# -ge 3 ] || die "usage: scripts/supervise.sh NAME PIDFILE COMMAND..."
name=$1 pidfile=$2
shift 2

readonly MIN_BACKOFF=1 MAX_BACKOFF=30 STABLE_SECONDS=60
child=""

stop() {
  trap '' TERM INT
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  rm -f "$pidfile"
  exit 0
}
trap stop TERM INT

# how_it_ended STATUS: "exited with status N" or "was killed by signal NAME".
how_it_ended() {
  if [ "$1" -gt 128 ]; then
    echo "was killed by signal $(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))"
  else
    echo "exited with status $1"
  fi
}

backoff=$MIN_BACKOFF
while :; do
  started=$SECONDS
  "$@" &
  child=$!
  echo "$child" >"$pidfile"
  wait "$child"
  status=$?
  ran=$((SECONDS - started))
  # INT is Ctrl-C, which the terminal sends the whole process group: the service was asked
  # to stop, not crashed. (A supervisor started in the background of a script has INT
  # ignored and cannot trap it, so this is where it learns of it.)
  if [ "$status" -eq $((128 + 2)) ]; then
    log "$name (pid $child) was stopped by INT (Ctrl-C) after ${ran}s; not restarting it"
    child=""
    stop
  fi
  [ "$ran" -lt "$STABLE_SECONDS" ] || backoff=$MIN_BACKOFF
  warn "$name (pid $child) $(how_it_ended "$status") after ${ran}s; restarting it in ${backoff}s"
  # Sleep as a child, so a TERM meanwhile stops the supervisor at once.
  sleep "$backoff" &
  child=$!
  wait "$child"
  backoff=$((backoff * 2 > MAX_BACKOFF ? MAX_BACKOFF : backoff * 2))
done
