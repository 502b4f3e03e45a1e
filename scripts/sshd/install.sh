#!/usr/bin/env bash
# Make sure Debian's OpenSSH server is installed, for shell tasks (`python -m stalwart.tasks.shell`)
# and their tests (tests/tasks/test_shell.py), with Debian's nss_wrapper (libnss-wrapper: a shell
# task run as a user that cannot log in, such as nobody, gives its sshd a passwd entry of its own).
#
# Idempotent and quiet: returns at once when $STALWART_SSHD (default /usr/sbin/sshd) and
# libnss_wrapper.so exist. Otherwise installs openssh-server and libnss-wrapper with apt. Needs
# root (or passwordless sudo) and the Debian package mirrors. The package's own service (a system
# sshd on port 22) is not started: shell tasks start their own sshd with their own config, so the
# install blocks service starts with a temporary /usr/sbin/policy-rc.d (only when none exists).
set -euo pipefail

sshd=${STALWART_SSHD:-/usr/sbin/sshd}

packages=(openssh-server libnss-wrapper)
if [[ -x $sshd ]] && compgen -G "/usr/lib/*/libnss_wrapper.so" >/dev/null; then
    exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "install.sh: $sshd or libnss_wrapper.so is missing; install them as root:" \
            "sudo bash $0 (or apt-get install ${packages[*]})" >&2
        exit 1
    fi
fi

policy=/usr/sbin/policy-rc.d
cleanup=""
if [[ ! -e $policy ]]; then
    # 101: "action not allowed": invoke-rc.d and deb-systemd-invoke start nothing.
    $sudo sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    cleanup=$policy
fi

# apt's output is shown only when it fails.
log=$(mktemp)
trap '$sudo rm -f "${cleanup:-}"; rm -f "$log"' EXIT
source "$(dirname "$0")/../apt-lock.sh"
apt() { apt_locked $sudo env DEBIAN_FRONTEND=noninteractive apt-get -q "$@" >>"$log" 2>&1; }
echo "install.sh: installing ${packages[*]} with apt"
if ! apt install -y --no-install-recommends "${packages[@]}"; then
    if ! { apt update && apt install -y --no-install-recommends "${packages[@]}"; }; then
        cat "$log" >&2
        echo "install.sh: apt-get install ${packages[*]} failed" >&2
        exit 1
    fi
fi

if [[ ! -x $sshd ]]; then
    echo "install.sh: openssh-server is installed but $sshd is still missing" >&2
    exit 1
fi
