#!/usr/bin/env bash
# Builds the sandbox image when its definition changed; otherwise returns at once.
#
# The image is tagged with a hash of what goes into it (deploy/sandbox, less what
# .dockerignore keeps out: the agent's tests, which ./runbox test mounts from the tree), so the
# tag itself says whether a rebuild is due. With a registry, Debian slim is the base; without one (an
# air-gapped host), the base is made from Debian packages with debootstrap and imported.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

HERE="$RUNBOX_ROOT/deploy/sandbox"
REPO=runbox-sandbox
PACKAGES="bash,coreutils,ripgrep,git,python3,procps,ca-certificates,passwd,poppler-utils,e2fsprogs,nodejs"
# Installed with apt inside the new root after debootstrap: npm depends on packages that
# other packages only "provide", which debootstrap's own resolver cannot install.
APT_PACKAGES="npm"
hash=$(cd "$HERE" && find . -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path './agent/tests/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
TAG="$REPO:$hash"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" "$REPO:latest"
  echo "$TAG"
  exit 0
fi

base=debian:bookworm-slim
# The Dockerfile installs packages only on a registry's Debian slim; on a base made here it
# needs no network at all, so its steps run without one.
network=default
if ! docker image inspect "$base" >/dev/null 2>&1 && ! timeout 20 docker pull -q "$base" >/dev/null 2>&1; then
  base_hash=$(echo "$PACKAGES $APT_PACKAGES" | sha256sum | cut -c1-12)
  base="$REPO-base:$base_hash"
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    have debootstrap || apt_install debootstrap
    is_root || die "building the sandbox base needs root (debootstrap)"
    rootfs=$(mktemp -d /tmp/runbox-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    log "no container registry reachable: building the sandbox base with debootstrap (about 2 minutes, once)"
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "${RUNBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
      >"$RUNBOX_STATE_DIR/debootstrap.log" 2>&1 || die "debootstrap failed; see $RUNBOX_STATE_DIR/debootstrap.log"
    cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
    { chroot "$rootfs" apt-get update -qq && DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y -qq --no-install-recommends $APT_PACKAGES; } \
      >>"$RUNBOX_STATE_DIR/debootstrap.log" 2>&1 || die "installing $APT_PACKAGES into the sandbox base failed; see $RUNBOX_STATE_DIR/debootstrap.log"
    : >"$rootfs/etc/resolv.conf"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
  fi
  network=none
fi

log "building $TAG from $base"
DOCKER_BUILDKIT=0 docker build -q --network "$network" --build-arg BASE_IMAGE="$base" \
  --label runbox.sandbox-hash="$hash" -t "$TAG" -t "$REPO:latest" "$HERE" >"$RUNBOX_STATE_DIR/sandbox-build.log" 2>&1 \
  || { cat "$RUNBOX_STATE_DIR/sandbox-build.log" >&2; die "sandbox image build failed"; }
echo "$TAG"
