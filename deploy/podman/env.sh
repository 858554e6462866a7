# shellcheck shell=bash
# Source this file (". deploy/podman/env.sh") before running podman for
# Meridian: it installs what is missing (podman, runc and podman-compose,
# from Debian's packages, with apt-get as root) and points podman at
# deploy/podman/containers.conf through CONTAINERS_CONF. Nothing else on
# the host is changed.
_meridian_podman_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_meridian_podman_missing=()
command -v podman >/dev/null 2>&1 || _meridian_podman_missing+=(podman)
command -v runc >/dev/null 2>&1 || _meridian_podman_missing+=(runc)
command -v podman-compose >/dev/null 2>&1 || _meridian_podman_missing+=(podman-compose)
if [ ${#_meridian_podman_missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deploy/podman/env.sh: ${_meridian_podman_missing[*]} missing; install them (Debian: apt-get install podman runc podman-compose)" >&2
    return 1 2>/dev/null || exit 1
  fi
  echo "deploy/podman/env.sh: installing ${_meridian_podman_missing[*]} (apt-get)" >&2
  apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      podman runc podman-compose netavark aardvark-dns iptables uidmap >/dev/null || {
    echo "deploy/podman/env.sh: apt-get install failed" >&2
    return 1 2>/dev/null || exit 1
  }
fi
export CONTAINERS_CONF="$_meridian_podman_dir/containers.conf"
unset _meridian_podman_dir _meridian_podman_missing
