# shellcheck shell=bash
# What a host needs from Debian to run AgentENV, in one place: sourced by scripts/setup.sh (a
# development checkout) and scripts/install.sh (an installed release), so both install the same.
# Defines lists and functions only; the caller decides what to install and when.

# A node at run time: networking (ip, iptables/nft), mounts and processes, volume filesystems
# (e2fsprogs' mkfs.ext4), the base template build (mmdebstrap), image unpacking (zstd, python3 for
# special files), and runsc (installed apart, below).
AENV_NODE_PACKAGES=(
  iproute2 iptables nftables conntrack kmod procps psmisc util-linux attr e2fsprogs
  mmdebstrap debian-archive-keyring
  python3 zstd curl ca-certificates
)
# Only the deployment tests (`npm run test:deploy`): a container engine, Compose, systemd-nspawn.
AENV_DEPLOY_PACKAGES=(docker.io docker-compose systemd-container)

aenv_log() { printf '\033[1m[%s]\033[0m %s\n' "${AENV_LOG_NAME:-aenv}" "$*"; }
aenv_die() {
  printf '\033[31m[%s] error:\033[0m %s\n' "${AENV_LOG_NAME:-aenv}" "$*" >&2
  exit 1
}

# Sets AENV_OS_ID and AENV_OS_CODENAME from os-release (AENV_OS_RELEASE overrides the path).
aenv_read_os() {
  local file=${AENV_OS_RELEASE:-/etc/os-release}
  [ -r "$file" ] || aenv_die "cannot read $file: unsupported operating system"
  AENV_OS_ID=$(. "$file" && printf '%s' "${ID:-}")
  AENV_OS_CODENAME=$(. "$file" && printf '%s' "${VERSION_CODENAME:-}")
  AENV_OS_NAME=$(. "$file" && printf '%s' "${PRETTY_NAME:-$ID}")
}

# Installed releases support exactly the systems they are tested for.
aenv_require_supported_os() {
  aenv_read_os
  case "$AENV_OS_ID/$AENV_OS_CODENAME" in
    debian/bookworm | ubuntu/noble) ;;
    *) aenv_die "unsupported operating system: $AENV_OS_NAME (supported: Debian 12 bookworm, Ubuntu 24.04 noble)" ;;
  esac
}

aenv_missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || printf '%s\n' "$p"
  done
}

# Debian versions runsc as 0.0~YYYYMMDD.N; upstream builds print release-YYYYMMDD.N.
aenv_runsc_date() { runsc --version 2>/dev/null | sed -n 's/^runsc version [^0-9]*\(0\.0~\)\{0,1\}\([0-9]\{8\}\).*/\2/p'; }
# Debian 12's own runsc (2022) cannot checkpoint a process that holds a socket in epoll.
aenv_runsc_ok() { command -v runsc >/dev/null && [ "$(aenv_runsc_date)" -ge 20240729 ] 2>/dev/null; }

# The backports build of runsc is required on Debian 12.
aenv_add_backports() {
  local list=/etc/apt/sources.list.d/aenv-backports.sources
  [ "$AENV_OS_ID" = debian ] && [ "$AENV_OS_CODENAME" = bookworm ] && [ ! -f "$list" ] || return 0
  aenv_log "adding bookworm-backports (for runsc 2024)"
  cat >"$list" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
}

# Installs those of the given packages that are missing, and runsc >= 2024-07-29; does nothing
# (not even apt-get update) when all are there.
aenv_install_packages() {
  aenv_read_os
  aenv_add_backports
  local missing
  mapfile -t missing < <(aenv_missing_packages "$@")
  if [ ${#missing[@]} -eq 0 ] && aenv_runsc_ok; then return 0; fi
  export DEBIAN_FRONTEND=noninteractive
  aenv_log "apt-get update"
  apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    aenv_log "installing: ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    aenv_stop_unwanted_services "${missing[@]}"
  fi
  if ! aenv_runsc_ok; then
    aenv_log "installing runsc from ${AENV_OS_CODENAME}-backports"
    apt-get install -y -qq --no-install-recommends -t "${AENV_OS_CODENAME}-backports" runsc >/dev/null ||
      aenv_die "could not install runsc >= 2024-07-29 (needs ${AENV_OS_CODENAME}-backports)"
  fi
  aenv_runsc_ok || aenv_die "runsc >= 2024-07-29 is required; found: $(runsc --version 2>&1 | head -1)"
}

# A registry on :5000, a Redis on :6379 or a system Docker (which rewrites the host's firewall) is
# not wanted: the tests and the local cluster start their own on loopback. Only what was installed just now is touched.
aenv_stop_unwanted_services() {
  local p svc
  for p in "$@"; do
    case $p in
      docker-registry | redis-server) svc=$p ;;
      docker.io) svc="docker.socket docker containerd" ;;
      *) continue ;;
    esac
    if command -v systemctl >/dev/null; then
      # shellcheck disable=SC2086
      systemctl disable --now $svc >/dev/null 2>&1 || true
    fi
    # Without systemd as PID 1 the package's init script started it.
    if [ -x "/etc/init.d/$p" ]; then
      "/etc/init.d/$p" stop >/dev/null 2>&1 || true
      update-rc.d "$p" disable >/dev/null 2>&1 || true
    fi
  done
}
