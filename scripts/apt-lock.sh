# Sourced by the repo's installers: `apt_locked CMD...` runs CMD (an apt-get call) holding one
# machine-wide lock, so installers started at once (parallel test workers) take turns: apt
# refuses a second apt while one runs. flock holds the lock itself (-o), so a daemon that a
# package starts during the install does not inherit it; it waits at most 15 minutes.
apt_lock_file="${TMPDIR:-/tmp}/stalwart-apt.lock"

apt_locked() {
    flock -o -w 900 "$apt_lock_file" "$@"
}
