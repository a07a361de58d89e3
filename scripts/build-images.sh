#!/usr/bin/env bash
# Builds AgentENV's container images from a release tarball:
#   aenv/node:<version>     the node, with runsc and its prerequisites (deploy/docker/node.Dockerfile)
#   aenv/control:<version>  scheduler and gateway (deploy/docker/control.Dockerfile), when the
#                           release has them
#   aenv/redis:<version>    Debian's redis-server, for the Compose cluster (deploy/docker/redis.Dockerfile)
#
#   build-images.sh [--from TARBALL] [--base IMAGE | --local-base] [--network NAME]
#
# The base defaults to debian:bookworm-slim from a registry. --local-base makes it here instead:
# mmdebstrap (Debian's mirror only) → `docker import`, for machines that reach no registry; no
# build step downloads anything but Debian packages. DOCKER (default: docker) picks the client;
# DOCKER_HOST the engine. --network is the build steps' network (`host` for an engine started
# with --bridge=none, which has no default bridge). The tag is the release's version; IMAGE_TAG overrides it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
AENV_LOG_NAME=images
. "$repo/scripts/prerequisites.sh"

usage="usage: build-images.sh [--from TARBALL] [--base IMAGE | --local-base] [--network NAME]"
from=
base=debian:bookworm-slim
local_base=false
network=()
while [ $# -gt 0 ]; do
  case $1 in
    --from) from=${2:-}; shift 2 || aenv_die "$usage" ;;
    --base) base=${2:-}; shift 2 || aenv_die "$usage" ;;
    --local-base) local_base=true; shift ;;
    --network) network=(--network "${2:-}"); shift 2 || aenv_die "$usage" ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) aenv_die "unknown option: $1 ($usage)" ;;
  esac
done
docker=${DOCKER:-docker}
command -v "$docker" >/dev/null || aenv_die "no docker client ($docker)"
"$docker" version >/dev/null 2>&1 || aenv_die "cannot reach a Docker engine (DOCKER_HOST=${DOCKER_HOST:-default})"

# Run from a checkout (deploy/docker beside it) or from an unpacked release (share/docker).
dockerfiles="$repo/deploy/docker"
[ -d "$dockerfiles" ] || dockerfiles="$repo/share/docker"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
if [ -z "$from" ] && [ -f "$repo/release.json" ]; then
  cp -a "$repo" "$ctx/release"
else
  if [ -z "$from" ]; then
    from=$(ls -t "$repo"/dist/aenv-*-linux-*.tar.gz 2>/dev/null | head -1 || true)
    [ -n "$from" ] || aenv_die "no release in dist/: run npm run release, or pass --from TARBALL"
  fi
  [ -f "$from" ] || aenv_die "no such release tarball: $from"
  tar -C "$ctx" -xzf "$from"
  mv "$ctx"/aenv-*-linux-*/ "$ctx/release"
fi
version=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$ctx/release/release.json" | head -1)
tag=${IMAGE_TAG:-$version}
cp "$dockerfiles"/*.Dockerfile "$ctx/"
# The release keeps one Node.js binary, hard-linked into the tools bundle; an image layer would
# store a hard link twice, a symlink once.
tools_node=$(cd "$ctx/release" && ls app/packages/*/dist-tools/bin/node 2>/dev/null | head -1 || true)
if [ -n "$tools_node" ] && cmp -s "$ctx/release/$tools_node" "$ctx/release/node/bin/node"; then
  ln -sf "../../$tools_node" "$ctx/release/node/bin/node"
fi

if $local_base; then
  # A Debian 12 root like bookworm-slim's, made from Debian's mirror and cached between builds.
  cache=${AENV_IMAGE_CACHE:-/var/cache/aenv-images}
  rootfs="$cache/bookworm-minbase.tar"
  if [ ! -f "$rootfs" ]; then
    command -v mmdebstrap >/dev/null || aenv_die "--local-base needs mmdebstrap (apt-get install mmdebstrap)"
    mkdir -p "$cache"
    aenv_log "making a Debian 12 root with mmdebstrap"
    mmdebstrap --quiet --variant=minbase --format=tar bookworm "$rootfs.partial"
    mv "$rootfs.partial" "$rootfs"
  fi
  base=aenv/debian-base:bookworm
  aenv_log "importing $rootfs as $base"
  "$docker" import - "$base" <"$rootfs" >/dev/null
fi

build() { # dockerfile image
  aenv_log "building $2"
  "$docker" build --quiet "${network[@]}" --build-arg "BASE=$base" -f "$ctx/$1" -t "$2" "$ctx" >/dev/null
}
build node.Dockerfile "aenv/node:$tag"
# The control image carries the release without the sandbox tools bundle (which holds its own
# copy of Node.js; the launchers use node/bin/node).
if [ -x "$ctx/release/bin/aenv-scheduler" ] || [ -x "$ctx/release/bin/aenv-gateway" ]; then
  cp -a "$ctx/release" "$ctx/control"
  rm -f "$ctx/control/node/bin/node"
  cp "$ctx/release/node/bin/node" "$ctx/control/node/bin/node"
  rm -rf "$ctx"/control/app/packages/*/dist-tools
  build control.Dockerfile "aenv/control:$tag"
else
  aenv_log "release $version has no aenv-scheduler or aenv-gateway: aenv/control not built"
fi
build redis.Dockerfile "aenv/redis:$tag"
"$docker" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "^aenv/.*:$tag " || true
