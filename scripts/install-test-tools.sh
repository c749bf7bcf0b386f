#!/usr/bin/env bash
# Install the system tools the integration tests drive besides the harnesses, all from Debian's
# packages (no browser or binary download of any library):
# - `chromium` with the Liberation fonts it recommends: the board's browser tests
#   (tests/it/board_browser.rs), the board benchmark and the README's screenshot;
# - `openssh-server` (`sshd`) and the `ssh` client: "another machine" for the remote tests, an
#   sshd the test starts on a loopback port (docs/harnesses/facts/remote-and-notify.md);
# - `dbus-daemon`: a private session bus for the desktop notification tests.
# Idempotent: nothing is fetched when every tool is in place.
set -euo pipefail

fonts=/usr/share/fonts/truetype/liberation
missing=()
command -v chromium >/dev/null 2>&1 && chromium --version >/dev/null 2>&1 || missing+=(chromium)
[[ -d "$fonts" ]] || missing+=(fonts-liberation)
[[ -x /usr/sbin/sshd ]] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus-daemon)

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "test tools already installed: $(chromium --version), fonts-liberation, openssh-server, dbus-daemon" >&2
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: missing ${missing[*]} and apt-get is missing; install them, then rerun $0" >&2
  exit 1
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "error: missing ${missing[*]}; run \`apt-get install -y ${missing[*]}\` as root, then rerun $0" >&2
    exit 1
  fi
  sudo=(sudo)
fi

# Each package once, in a stable order.
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "installing Debian's ${packages[*]}" >&2
# A fresh machine's package lists may be missing or stale: update them once, then install.
"${sudo[@]}" apt-get update -qq
# The package's own sshd service cannot start in a container (policy-rc.d refuses it) and is
# not wanted: the tests start their own sshd on a loopback port.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null

for tool in chromium ssh ssh-keygen dbus-daemon; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: \`$tool\` is missing after apt-get install ${packages[*]}" >&2; exit 1; }
done
[[ -x /usr/sbin/sshd ]] || { echo "error: /usr/sbin/sshd is missing after apt-get install openssh-server" >&2; exit 1; }
[[ -d "$fonts" ]] || { echo "error: $fonts is missing after apt-get install fonts-liberation" >&2; exit 1; }
echo "test tools installed: $(chromium --version), openssh-server, dbus-daemon" >&2
