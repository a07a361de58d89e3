#!/usr/bin/env bash
# Installs everything AgentENV needs on a fresh Debian 12 / Ubuntu machine, as root, idempotently:
# Debian packages (gVisor's runsc from bookworm-backports, networking tools, image tools, test
# services), the npm workspace, and the TypeScript build. Safe to run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (sandboxes need namespaces, cgroups and iptables)"
command -v node >/dev/null || die "Node.js >= 20 is required (not found)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "Node.js >= 20 is required (found $(node --version))"

. /etc/os-release
codename=${VERSION_CODENAME:-}

# runsc: Debian 12's own build (2022) cannot checkpoint a process that holds a socket in epoll, so
# the backports build is required there.
backports_list=/etc/apt/sources.list.d/aenv-backports.sources
if [ "$ID" = debian ] && [ "$codename" = bookworm ] && [ ! -f "$backports_list" ]; then
  log "adding bookworm-backports (for runsc 2024)"
  cat > "$backports_list" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  rm -f /var/lib/apt/periodic/aenv-updated
fi

packages=(
  zsh fish # the CLI's completion scripts are checked by the shells they are for
  iproute2 iptables nftables kmod procps psmisc util-linux attr
  mmdebstrap debian-archive-keyring busybox-static
  python3 make g++ tmux curl ca-certificates
  zstd docker-registry skopeo
)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
# Debian versions runsc as 0.0~YYYYMMDD.N; upstream builds print release-YYYYMMDD.N.
runsc_date() { runsc --version 2>/dev/null | sed -n 's/^runsc version [^0-9]*\(0\.0~\)\{0,1\}\([0-9]\{8\}\).*/\2/p'; }
runsc_ok() { command -v runsc >/dev/null && [ "$(runsc_date)" -ge 20240729 ] 2>/dev/null; }
if [ ${#missing[@]} -gt 0 ] || ! runsc_ok; then
  export DEBIAN_FRONTEND=noninteractive
  log "apt-get update"
  apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # docker-registry is only for the OCI tests, which start their own on 127.0.0.1: no service on :5000.
    if [[ " ${missing[*]} " == *" docker-registry "* ]] && command -v systemctl >/dev/null; then
      systemctl disable --now docker-registry >/dev/null 2>&1 || true
    fi
  fi
  if ! runsc_ok; then
    log "installing runsc from ${codename}-backports"
    apt-get install -y -qq --no-install-recommends -t "${codename}-backports" runsc >/dev/null \
      || die "could not install runsc >= 2024-07-29 (needs ${codename}-backports)"
  fi
fi
runsc_ok || die "runsc >= 2024-07-29 is required; found: $(runsc --version 2>&1 | head -1)"

log "npm ci"
npm ci --no-audit --no-fund --loglevel=error
log "build"
npm run build --silent
log "done: runsc $(runsc --version | sed -n 's/^runsc version //p'), node $(node --version)"
