#!/usr/bin/env bash
# Builds Runbox's service images and prints their tags, one `VARIABLE=tag` line each:
#
#   RUNBOX_IMAGE            gateway, executor and migrations (one image, three commands)
#   RUNBOX_ENGINE_IMAGE     the executor's own Docker engine, with the sandbox image inside
#   RUNBOX_POSTGRES_IMAGE   PostgreSQL from Debian's packages (Compose and the dev overlay)
#   RUNBOX_NATS_IMAGE       NATS with JetStream from Debian's packages
#   RUNBOX_SANDBOX_IMAGE    the sandbox every session runs in (deploy/sandbox/build.sh)
#
# Every tag is a hash of what goes into the image, as for the sandbox image: when the tag is
# already present nothing is built, so a second run returns in seconds. Expects the services
# to be built (dist/) and the npm packages installed: `./runbox images` does both first.
#
# Bases: `debian:trixie-slim` when a registry has it; otherwise a trixie base is made once
# with debootstrap from RUNBOX_DEBIAN_MIRROR. Trixie, because it ships Node.js 20 (bookworm's
# is 18, too old for the services). Packages are installed by the Dockerfiles from the base's
# own Debian sources either way.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

HERE="$RUNBOX_ROOT/deploy/images"
VERSION=$(node -p 'require(process.argv[1]).version' "$RUNBOX_ROOT/package.json")
SOURCE_URL="${RUNBOX_SOURCE_URL:-https://github.com/runbox/runbox}"
LOGS="$RUNBOX_STATE_DIR/logs"
mkdir -p "$LOGS"

hash_files() { (cd "$RUNBOX_ROOT" && LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-12; }
hash_dir() { (cd "$RUNBOX_ROOT" && find "$@" -type f -print0) | hash_files; }
present() { docker image inspect "$1" >/dev/null 2>&1; }

debian_base() {
  local slim=debian:trixie-slim
  if present "$slim" || timeout 20 docker pull -q "$slim" >/dev/null 2>&1; then
    echo "$slim"
    return
  fi
  local mirror="${RUNBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  local tag; tag="runbox-debian:trixie-$(echo "trixie ca-certificates $mirror" | sha256sum | cut -c1-12)"
  if ! present "$tag"; then
    have debootstrap || apt_install debootstrap
    is_root || die "building the Debian base needs root (debootstrap)"
    local rootfs; rootfs=$(mktemp -d /tmp/runbox-trixie.XXXXXX)
    log "no container registry reachable: building a Debian trixie base with debootstrap (about a minute, once)"
    debootstrap --variant=minbase --include=ca-certificates trixie "$rootfs" "$mirror" >"$LOGS/debootstrap-trixie.log" 2>&1 \
      || { rm -rf "$rootfs"; die "debootstrap failed; see $LOGS/debootstrap-trixie.log"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
    rm -rf "$rootfs"
  fi
  echo "$tag"
}

# build NAME TAG CONTEXT: docker build with the common labels, quietly, logging to a file.
build() {
  local name=$1 tag=$2 context=$3
  log "building $tag"
  local started=$SECONDS
  DOCKER_BUILDKIT=0 docker build -q --force-rm --build-arg BASE_IMAGE="$BASE" \
    --label org.opencontainers.image.title="$name" \
    --label org.opencontainers.image.version="$VERSION" \
    --label org.opencontainers.image.source="$SOURCE_URL" \
    --label org.opencontainers.image.revision="${tag##*:}" \
    -t "$tag" -f "$context/Dockerfile" "$context" >"$LOGS/image-$name.log" 2>&1 \
    || { cat "$LOGS/image-$name.log" >&2; die "building $name failed"; }
  log "built $tag in $((SECONDS - started))s"
}

BASE=$(debian_base)
SANDBOX_IMAGE=$("$RUNBOX_ROOT/deploy/sandbox/build.sh")

# The services: dist/, the production npm packages and the migrations. Keyed by the sources
# the build compiles, not by dist/, so the tag is known before anything is copied.
app_hash=$( { (cd "$RUNBOX_ROOT" && find apps libs prisma deploy/images/runbox deploy/images/build.sh -type f ! -name '*.spec.ts' -print0) \
  ; printf '%s\0' package.json package-lock.json tsconfig.json tsconfig.build.json nest-cli.json prisma.config.ts scripts/prisma.js; } \
  | hash_files)
RUNBOX_IMAGE="runbox:$VERSION-$(echo "$app_hash $BASE" | sha256sum | cut -c1-12)"
if ! present "$RUNBOX_IMAGE"; then
  for app in gateway executor; do
    [ -f "$RUNBOX_ROOT/dist/apps/$app/apps/$app/src/main.js" ] || die "dist/ has no $app: run ./runbox images, which builds it first"
  done
  [ -f "$RUNBOX_ROOT/dist/console/app.js" ] || die "dist/ has no console: run ./runbox images, which builds it first"
  ctx=$(mktemp -d /tmp/runbox-image.XXXXXX)
  trap 'rm -rf "$ctx"' EXIT
  cp -r "$HERE/runbox/." "$ctx/"
  mkdir -p "$ctx/app"
  cp -r "$RUNBOX_ROOT/package.json" "$RUNBOX_ROOT/package-lock.json" "$RUNBOX_ROOT/prisma" "$RUNBOX_ROOT/prisma.config.ts" "$ctx/app/"
  mkdir -p "$ctx/app/scripts" "$ctx/app/dist/apps"
  cp "$RUNBOX_ROOT/scripts/prisma.js" "$ctx/app/scripts/"
  # prisma.config.ts's migration adapter (it sends each migration script whole).
  mkdir -p "$ctx/app/libs/persistence/src"
  cp "$RUNBOX_ROOT/libs/persistence/src/whole-script-migrations.ts" "$ctx/app/libs/persistence/src/"
  cp -r "$RUNBOX_ROOT/dist/apps/gateway" "$RUNBOX_ROOT/dist/apps/executor" "$ctx/app/dist/apps/"
  # The web console's bundle, served by the gateway at /console.
  cp -r "$RUNBOX_ROOT/dist/console" "$ctx/app/dist/"
  # Production packages only, from npm's cache (the development install just filled it).
  log "installing production npm packages for the image"
  (cd "$ctx/app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error >"$LOGS/image-npm.log" 2>&1) \
    || { cat "$LOGS/image-npm.log" >&2; die "npm ci --omit=dev failed"; }
  # The generated Prisma client (engine-less, so nothing platform-specific in it).
  cp -r "$RUNBOX_ROOT/node_modules/.prisma" "$ctx/app/node_modules/"
  build runbox "$RUNBOX_IMAGE" "$ctx"
  rm -rf "$ctx"
  trap - EXIT
fi
docker tag "$RUNBOX_IMAGE" "runbox:$VERSION"

# The engine carries the sandbox image (docker save), and loads it into itself as it starts.
ENGINE_IMAGE="runbox-engine:$VERSION-$( { hash_dir deploy/images/engine; echo "$SANDBOX_IMAGE $BASE"; } | sha256sum | cut -c1-12)"
if ! present "$ENGINE_IMAGE"; then
  ctx=$(mktemp -d /tmp/runbox-image.XXXXXX)
  trap 'rm -rf "$ctx"' EXIT
  cp -r "$HERE/engine/." "$ctx/"
  docker save "$SANDBOX_IMAGE" -o "$ctx/sandbox-image.tar"
  echo "$SANDBOX_IMAGE" >"$ctx/sandbox-image.tag"
  build engine "$ENGINE_IMAGE" "$ctx"
  rm -rf "$ctx"
  trap - EXIT
fi
docker tag "$ENGINE_IMAGE" "runbox-engine:$VERSION"

POSTGRES_IMAGE="runbox-postgres:$VERSION-$( { hash_dir deploy/images/postgres; echo "$BASE"; } | sha256sum | cut -c1-12)"
present "$POSTGRES_IMAGE" || build postgres "$POSTGRES_IMAGE" "$HERE/postgres"
docker tag "$POSTGRES_IMAGE" "runbox-postgres:$VERSION"
NATS_IMAGE="runbox-nats:$VERSION-$( { hash_dir deploy/images/nats; echo "$BASE"; } | sha256sum | cut -c1-12)"
present "$NATS_IMAGE" || build nats "$NATS_IMAGE" "$HERE/nats"
docker tag "$NATS_IMAGE" "runbox-nats:$VERSION"

echo "RUNBOX_IMAGE=$RUNBOX_IMAGE"
echo "RUNBOX_ENGINE_IMAGE=$ENGINE_IMAGE"
echo "RUNBOX_POSTGRES_IMAGE=$POSTGRES_IMAGE"
echo "RUNBOX_NATS_IMAGE=$NATS_IMAGE"
echo "RUNBOX_SANDBOX_IMAGE=$SANDBOX_IMAGE"
