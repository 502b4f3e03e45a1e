#!/usr/bin/env bash
# Make sure Debian's chromium is installed for the browser tests of the web UI (tests/ui).
#
# Idempotent: returns at once when /usr/bin/chromium (or $STALWART_CHROMIUM) already runs.
# Playwright's own browser download is not used: the tests launch this chromium with
# executable_path. Needs root (or passwordless sudo) and the Debian package mirrors to install.
set -euo pipefail

chromium=${STALWART_CHROMIUM:-/usr/bin/chromium}

if [[ -x $chromium ]] && "$chromium" --headless --no-sandbox --version >/dev/null 2>&1; then
    echo "browser.sh: $("$chromium" --version 2>/dev/null || echo chromium) already installed"
    exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "browser.sh: $chromium is missing and installing it needs root" >&2
        exit 1
    fi
fi

source "$(dirname "$0")/../apt-lock.sh"
export DEBIAN_FRONTEND=noninteractive
echo "browser.sh: installing chromium with apt"
apt_locked $sudo apt-get install -y --no-install-recommends chromium >/dev/null \
    || { apt_locked $sudo apt-get update >/dev/null \
         && apt_locked $sudo apt-get install -y --no-install-recommends chromium >/dev/null; }
"$chromium" --version
