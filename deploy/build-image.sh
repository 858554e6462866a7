#!/usr/bin/env bash
# Build Meridian's container image: deploy/build-image.sh [TAG]
#
# The binary is built here, on the host (static, CGO_ENABLED=0, with the
# version and commit stamped: `meridian version` prints them), then
# deploy/Containerfile copies it into a scratch image. With a Go builder
# image at hand, a multi-stage build does the same: build the binary as
# below in a golang stage and copy the layout that stage() makes.
#
# TAG defaults to localhost/meridian:latest. The engine is podman (set up
# by deploy/podman/env.sh, which installs it on Debian when missing), or
# docker where there is no podman and a docker daemon answers;
# CONTAINER_ENGINE=docker forces it.
# VERSION overrides the version (default: git describe).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/meridian:latest}

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    engine=podman
  else
    engine=docker
  fi
fi
if [ "$engine" = podman ]; then
  # shellcheck source=podman/env.sh
  . deploy/podman/env.sh
fi

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD 2>/dev/null; then
  revision="$revision+dirty"
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/pulsar/bin" "$ctx/rootfs/etc/ssl/certs" \
  "$ctx/writable/pulsar/data" "$ctx/writable/pulsar/conf" "$ctx/writable/data" "$ctx/writable/tmp"
CGO_ENABLED=0 GOFLAGS= go build -trimpath -buildvcs=false \
  -ldflags "-s -w -X main.version=$version -X main.revision=$revision" \
  -o "$ctx/rootfs/usr/local/bin/meridian" ./cmd/meridian
ln -s /usr/local/bin/meridian "$ctx/rootfs/pulsar/bin/pulsar"
printf 'root:x:0:0:root:/:/sbin/nologin\nmeridian:x:10000:10000:meridian:/pulsar:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nmeridian:x:10000:\n' >"$ctx/rootfs/etc/group"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
fi
chmod 1777 "$ctx/writable/tmp"
touch "$ctx/writable/pulsar/data/.keep" "$ctx/writable/pulsar/conf/.keep" "$ctx/writable/data/.keep"

"$engine" build --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.title=meridian" \
  -f deploy/Containerfile -t "$tag" "$ctx" >&2
echo "$tag"
