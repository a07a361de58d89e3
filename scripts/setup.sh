#!/usr/bin/env bash
# Installs everything AgentENV needs on a fresh Debian 12 / Ubuntu machine, as root, idempotently:
# Debian packages (gVisor's runsc from bookworm-backports, networking tools, image tools, test
# services), the npm workspace, and the TypeScript build. Safe to run again at any time.
#   --deploy   also what the deployment tests need (Docker, Compose, systemd-nspawn)
set -euo pipefail
cd "$(dirname "$0")/.."
AENV_LOG_NAME=setup
. scripts/prerequisites.sh

deploy=false
for arg in "$@"; do
  case $arg in
    --deploy) deploy=true ;;
    *) aenv_die "unknown option: $arg (usage: setup.sh [--deploy])" ;;
  esac
done

[ "$(id -u)" = 0 ] || aenv_die "run as root (sandboxes need namespaces, cgroups and iptables)"
command -v node >/dev/null || aenv_die "Node.js >= 20 is required (not found)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || aenv_die "Node.js >= 20 is required (found $(node --version))"

# What a node needs (scripts/prerequisites.sh), then what building and testing need.
packages=(
  "${AENV_NODE_PACKAGES[@]}"
  busybox-static make gcc g++ tmux
  docker-registry skopeo redis-server
  chromium fonts-dejavu-core
  zsh fish # the CLI's completion scripts are checked by the shells they are for
)
if $deploy; then packages+=("${AENV_DEPLOY_PACKAGES[@]}"); fi
aenv_install_packages "${packages[@]}"

aenv_log "npm ci"
npm ci --no-audit --no-fund --loglevel=error
aenv_log "build"
npm run build --silent
aenv_log "done: runsc $(runsc --version | sed -n 's/^runsc version //p'), node $(node --version)"
