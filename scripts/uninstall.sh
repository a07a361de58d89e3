#!/usr/bin/env bash
# Removes what scripts/install.sh installed, as root: the services (stopped first: the node pauses
# its sandboxes), the units, /opt/aenv, /etc/aenv, /etc/default/aenv, the `aenv` command, and
# whatever the node left on the host (iptables chains and jumps, network namespaces, veths,
# cgroups). The state under /var/lib/aenv (sandboxes, templates, snapshots, the API key) stays
# unless --purge. Running it again does nothing.
#   uninstall.sh [--purge]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
AENV_LOG_NAME=uninstall
. "$here/prerequisites.sh"

purge=false
for arg in "$@"; do
  case $arg in
    --purge) purge=true ;;
    -h | --help) echo "usage: uninstall.sh [--purge]"; exit 0 ;;
    *) aenv_die "unknown option: $arg (usage: uninstall.sh [--purge])" ;;
  esac
done
[ "$(id -u)" = 0 ] || aenv_die "run as root"

ENV_FILE=/etc/default/aenv
STATE=/var/lib/aenv
UNITS=(aenv.service aenv-gateway.service aenv-scheduler.service)

# A setting from /etc/default/aenv (empty when it or the file is absent: a rerun has removed it).
setting() { [ -f "$ENV_FILE" ] && sed -n "s/^$1=//p" "$ENV_FILE" | tail -1 || true; }
# The node's network tag names everything it put on the host (default n0).
tag=$(setting AENV_NETWORK_NODE_TAG)
tag=${tag:-n0}
runtime=$(setting AENV_RUNTIME_PATH)
runtime=${runtime:-/run/aenv}

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
  for unit in "${UNITS[@]}"; do
    if systemctl list-unit-files --no-legend "$unit" 2>/dev/null | grep -q .; then
      aenv_log "stopping and disabling $unit"
      systemctl disable --now --quiet "$unit" || true
    fi
  done
else
  for unit in "${UNITS[@]}"; do systemctl disable --quiet "$unit" >/dev/null 2>&1 || true; done
fi
removed_unit=false
for unit in "${UNITS[@]}"; do
  if [ -e "/etc/systemd/system/$unit" ]; then
    rm -f "/etc/systemd/system/$unit"
    removed_unit=true
  fi
done
if $removed_unit && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi

# A node that was killed rather than stopped leaves its chains, namespaces and veths.
remove_chains() { # iptables-save iptables
  command -v "$1" >/dev/null || return 0
  local table line
  for table in filter nat; do
    # Jumps into our chains first (a referenced chain cannot be deleted), then the chains.
    { "$1" -t "$table" 2>/dev/null || true; } | { grep -E "^-A .* -[jg] AENV-$tag-" || true; } |
      { grep -vE "^-A AENV-$tag-" || true; } |
      while read -r line; do "$2" -w -t "$table" -D ${line#-A } || true; done
    { "$1" -t "$table" 2>/dev/null || true; } | sed -n "s/^:\(AENV-$tag-[^ ]*\) .*/\1/p" |
      while read -r line; do "$2" -w -t "$table" -F "$line" && "$2" -w -t "$table" -X "$line" || true; done
  done
}
remove_chains iptables-save iptables
remove_chains iptables-legacy-save iptables-legacy
if command -v ip >/dev/null; then
  for link in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(ae-$tag-[0-9]*\)[@:].*/\1/p"); do
    ip link del "$link" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^aenv-$tag-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
fi
for dir in /sys/fs/cgroup/aenv-"$tag" /sys/fs/cgroup/*/aenv-"$tag"; do
  [ -d "$dir" ] || continue
  find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
done
rm -rf "${runtime:?}/$tag"
rmdir "$runtime" 2>/dev/null || true

for path in /opt/aenv /etc/aenv "$ENV_FILE"; do
  if [ -e "$path" ]; then
    rm -rf "$path"
    aenv_log "removed $path"
  fi
done
if [ "$(readlink /usr/local/bin/aenv 2>/dev/null)" = /opt/aenv/current/bin/aenv ]; then rm -f /usr/local/bin/aenv; fi

if $purge && [ -e "$STATE" ]; then
  # Layer and template mounts under the state directory go first, deepest first.
  awk -v s="$STATE" '$5 == s || index($5, s "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r mnt; do umount "$mnt" 2>/dev/null || umount -l "$mnt" || true; done
  rm -rf "$STATE"
  aenv_log "removed $STATE"
elif [ -e "$STATE" ]; then
  aenv_log "kept $STATE (sandboxes, templates, snapshots, API key); --purge removes it"
fi
aenv_log "done"
