#!/bin/sh
# Starts dockerd on a unix socket in a directory shared with the executor (a volume), owned
# by the executor's group, then loads the sandbox image into it. No TCP listener: only the
# processes that share the socket's volume can reach the engine.
#   RUNBOX_ENGINE_SOCKET_DIR   where docker.sock goes (default /run/runbox-engine)
#   RUNBOX_ENGINE_SOCKET_GID   the group that may use it (default 10001, the executor's)
#   RUNBOX_ENGINE_ARGS         extra dockerd flags (say, --bridge none --iptables=false)
#   RUNBOX_ENGINE_LOOP_DEVICES loop device nodes made at start (default 256)
set -eu
dir=${RUNBOX_ENGINE_SOCKET_DIR:-/run/runbox-engine}
sock="unix://$dir/docker.sock"
mkdir -p "$dir"
rm -f "$dir/docker.sock"

# Without `privileged` (Compose grants the capabilities one by one instead, see
# deploy/compose/README.md), Docker mounts the cgroup v1 hierarchies read-only; with
# CAP_SYS_ADMIN they can be mounted again writable. (Privileged, or on cgroup v2, they
# already are, and this finds nothing to do.)
awk '$3 == "cgroup" && $4 ~ /^ro(,|$)/ { print $2, $4 }' /proc/mounts | while read -r path opts; do
  keep=$(echo "$opts" | tr , '\n' | grep -vx -e ro -e nosuid -e nodev -e noexec -e relatime | paste -sd, -)
  umount "$path" && mount -t cgroup -o "$keep" cgroup "$path"
done
# Sandboxes go below this container's own cgroup, so its limits bound them all (cgroup v1
# shares the host's hierarchy; on v2 the namespace already puts them there).
own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
parent=""
[ -n "$own" ] && [ "$own" != / ] && parent="--cgroup-parent=$own/sandboxes"
# Per-workspace disk limits loop-mount ext4 images: make sure the loop control device exists.
[ -e /dev/loop-control ] || mknod -m 660 /dev/loop-control c 10 237 2>/dev/null || true
# The executor's disk helper attaches each workspace image to a loop device the kernel makes
# on demand, and dockerd here mounts it. A container's /dev is filled once, when it starts,
# so a node the host gets later never shows up here: make the nodes up front. As many
# workspaces as there are nodes can be mounted at once (RUNBOX_ENGINE_LOOP_DEVICES).
i=0
while [ "$i" -lt "${RUNBOX_ENGINE_LOOP_DEVICES:-256}" ]; do
  [ -e "/dev/loop$i" ] || mknod -m 660 "/dev/loop$i" b 7 "$i" 2>/dev/null || true
  i=$((i + 1))
done

# shellcheck disable=SC2086
dockerd --host "$sock" --group "${RUNBOX_ENGINE_SOCKET_GID:-10001}" $parent ${RUNBOX_ENGINE_ARGS:-} &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; exit 0' TERM INT

tries=0
until docker -H "$sock" version >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || { echo "dockerd exited" >&2; exit 1; }
  tries=$((tries + 1))
  [ "$tries" -lt 600 ] || { echo "dockerd did not answer in 60s" >&2; kill "$pid"; exit 1; }
  sleep 0.1
done
image=$(cat /opt/runbox/sandbox-image.tag)
if ! docker -H "$sock" image inspect "$image" >/dev/null 2>&1; then
  docker -H "$sock" load -q -i /opt/runbox/sandbox-image.tar
fi
# Also as runbox-sandbox:current, so the executor's setting need not change with each build:
# the engine image's own tag pins which sandbox image that is.
docker -H "$sock" tag "$image" runbox-sandbox:current
echo "engine ready; sandbox image $image loaded as runbox-sandbox:current"
wait "$pid"
