#!/usr/bin/env bash
# Installs an AgentENV release with systemd units on Debian 12 or Ubuntu 24.04, as root.
#   install.sh [--role node|scheduler|gateway|all] [--from TARBALL] [--no-start]
# Idempotent: a second run with the same release changes nothing, and files an operator may edit
# (/etc/aenv/config.toml, /etc/default/aenv) are written only when absent. Without --from, the
# release is the unpacked one this script sits in. Nothing is changed before every check passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
AENV_LOG_NAME=install
. "$here/prerequisites.sh"

usage="usage: install.sh [--role node|scheduler|gateway|all] [--from TARBALL] [--no-start]"
role=node
from=
start=true
while [ $# -gt 0 ]; do
  case $1 in
    --role) role=${2:-}; shift 2 || aenv_die "$usage" ;;
    --role=*) role=${1#*=}; shift ;;
    --from) from=${2:-}; shift 2 || aenv_die "$usage" ;;
    --from=*) from=${1#*=}; shift ;;
    --no-start) start=false; shift ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) aenv_die "unknown option: $1 ($usage)" ;;
  esac
done
case $role in
  node | scheduler | gateway | all) ;;
  *) aenv_die "unknown role: $role ($usage)" ;;
esac

[ "$(id -u)" = 0 ] || aenv_die "run as root: the installer writes /opt/aenv, /etc and systemd units"
aenv_require_supported_os

PREFIX=/opt/aenv
ETC=/etc/aenv
ENV_FILE=/etc/default/aenv
UNIT_DIR=/etc/systemd/system
STATE=/var/lib/aenv
command_of() { case $1 in node) echo aenv-server ;; *) echo "aenv-$1" ;; esac; }
unit_of() { case $1 in node) echo aenv.service ;; *) echo "aenv-$1.service" ;; esac; }
systemd_running() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

# ---- the release: unpacked into a scratch directory and checked before anything is installed
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if [ -n "$from" ]; then
  [ -f "$from" ] || aenv_die "no such release tarball: $from"
  if [ -f "$from.sha256" ]; then
    (cd "$(dirname "$from")" && sha256sum --quiet -c "$(basename "$from").sha256") ||
      aenv_die "$from does not match $from.sha256"
  fi
  tar -C "$scratch" -xzf "$from" || aenv_die "cannot unpack $from"
  release=$(find "$scratch" -mindepth 1 -maxdepth 1 -type d | head -1)
elif [ -f "$here/../release.json" ]; then
  release=$(cd "$here/.." && pwd -P)
else
  aenv_die "no release: pass --from aenv-<version>-linux-<arch>.tar.gz (made by npm run release)"
fi
[ -f "$release/release.json" ] || aenv_die "not an AgentENV release (no release.json)"
(cd "$release" && sha256sum --quiet --strict -c SHA256SUMS) || aenv_die "release files do not match SHA256SUMS"
field() { "$release/node/bin/node" -e 'const r = require(process.argv[1]); console.log(r[process.argv[2]] ?? "")' "$release/release.json" "$1"; }
version=$(field version)
arch=$(field arch)
case $(uname -m) in x86_64) host_arch=x64 ;; aarch64) host_arch=arm64 ;; *) host_arch=$(uname -m) ;; esac
[ "$arch" = "$host_arch" ] || aenv_die "this release is for $arch, this machine is $host_arch"
glibc=$(field glibc)
host_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
if [ -n "$glibc" ] && [ "$(printf '%s\n%s\n' "$glibc" "$host_glibc" | sort -V | head -1)" != "$glibc" ]; then
  aenv_die "this release needs glibc >= $glibc (its Node.js and native modules); this machine has $host_glibc"
fi
# `all` is every role the release has; a role asked for by name must be there.
if [ "$role" = all ]; then
  roles=()
  for r in scheduler gateway node; do
    if [ -x "$release/bin/$(command_of "$r")" ]; then roles+=("$r"); else aenv_log "release $version has no $(command_of "$r"): role $r skipped"; fi
  done
else
  roles=("$role")
  [ -x "$release/bin/$(command_of "$role")" ] || aenv_die "release $version has no $(command_of "$role") (role $role)"
fi
has_role() { case " ${roles[*]} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# ---- prerequisites (the node's Debian packages and runsc; scheduler and gateway need none)
if has_role node; then aenv_install_packages "${AENV_NODE_PACKAGES[@]}"; fi

# ---- files; every step leaves what is already right untouched
changed=false
install_if_different() { # src dest mode
  if ! cmp -s "$1" "$2"; then
    install -D -m "$3" "$1" "$2"
    changed=true
    aenv_log "wrote $2"
  fi
}
link_if_different() { # target link
  if [ "$(readlink "$2" 2>/dev/null)" != "$1" ]; then
    ln -sfn "$1" "$2"
    changed=true
    aenv_log "linked $2 -> $1"
  fi
}

target="$PREFIX/$version"
if [ -d "$target" ] && cmp -s "$target/SHA256SUMS" "$release/SHA256SUMS"; then
  :
else
  mkdir -p "$PREFIX"
  rm -rf "$PREFIX/.incoming"
  cp -a "$release" "$PREFIX/.incoming"
  rm -rf "$target"
  mv "$PREFIX/.incoming" "$target"
  changed=true
  upgraded=true
  aenv_log "unpacked AgentENV $version into $target"
fi
link_if_different "$version" "$PREFIX/current"
link_if_different "$PREFIX/current/bin/aenv" /usr/local/bin/aenv

if [ ! -f "$ETC/config.toml" ]; then
  install -D -m 0644 "$release/share/config/config.toml" "$ETC/config.toml"
  aenv_log "wrote $ETC/config.toml"
fi
if [ ! -f "$ENV_FILE" ]; then
  install -D -m 0600 "$release/share/config/aenv.env" "$ENV_FILE"
  # One machine with every role is a one-host cluster: the gateway (:8080) is its front door, the
  # node registers with the scheduler beside it, and the scheduler listens on loopback only.
  if [ "$role" = all ] && has_role scheduler; then
    sed -i -e 's|^# AENV_SCHEDULER_URL=.*|AENV_SCHEDULER_URL=http://127.0.0.1:9090|' \
      -e 's|^# SCHEDULER_ADDR=.*|SCHEDULER_ADDR=127.0.0.1:9090|' "$ENV_FILE"
  fi
  aenv_log "wrote $ENV_FILE"
fi
# The API key is made once. It also goes into the node's state, which an uninstall keeps, so a
# reinstall finds the same key.
if ! grep -q '^AENV_API_KEY=' "$ENV_FILE"; then
  key_file="$STATE/secrets/api-key"
  if [ -s "$key_file" ]; then
    key=$(cat "$key_file")
  else
    key="e2b_$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
    install -d -m 0700 "$STATE" "$STATE/secrets"
    (umask 077 && printf '%s\n' "$key" >"$key_file")
  fi
  printf '\n# The API key (X-API-Key / E2B_API_KEY) of every service here.\nAENV_API_KEY=%s\n' "$key" >>"$ENV_FILE"
  changed=true
  aenv_log "API key written to $ENV_FILE"
fi

units=()
for r in "${roles[@]}"; do
  unit=$(unit_of "$r")
  install_if_different "$release/share/systemd/$unit" "$UNIT_DIR/$unit" 0644
  units+=("$unit")
done

if systemd_running; then
  $changed && systemctl daemon-reload
  for unit in "${units[@]}"; do
    systemctl is-enabled --quiet "$unit" 2>/dev/null || systemctl enable --quiet "$unit"
    if $start; then
      if [ "${upgraded:-false}" = true ]; then systemctl restart "$unit"; else systemctl start "$unit"; fi
    fi
  done
else
  for unit in "${units[@]}"; do
    systemctl is-enabled --quiet "$unit" 2>/dev/null || systemctl enable --quiet "$unit" 2>/dev/null || true
  done
  aenv_log "systemd is not running here: units installed and enabled, not started"
fi

if $changed; then
  aenv_log "AgentENV $version installed (${roles[*]}); settings in $ENV_FILE and $ETC/config.toml"
else
  aenv_log "AgentENV $version already installed (${roles[*]}): nothing changed"
fi
$start || aenv_log "start with: systemctl start ${units[*]}"
