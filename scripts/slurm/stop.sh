#!/usr/bin/env bash
# Stop the Slurm started by scripts/slurm/setup.sh (its slurmds, slurmctld, munged).
#
# Only the daemons named by their pid files are stopped. Their state (/var/spool/slurm*) and the
# configuration stay; setup.sh starts them again. `--quiet` prints nothing.
set -uo pipefail

quiet=0
[[ ${1:-} == --quiet ]] && quiet=1
say() { [[ $quiet -eq 1 ]] || echo "$*"; }

stop_pidfile() {
    local name=$1 pidfile=$2 pid
    [[ -f $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        say "stopping $name (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$pidfile"
}

for pidfile in /run/slurm/slurmd.pid /run/slurm/slurmd-*.pid; do
    [[ -e $pidfile ]] && stop_pidfile "slurmd ($(basename "$pidfile" .pid))" "$pidfile"
done
stop_pidfile slurmctld /run/slurm/slurmctld.pid
if [[ ${STALWART_SLURM_KEEP_MUNGE:-0} != 1 ]]; then
    stop_pidfile munged /run/munge/munged.pid
fi
say "Slurm stopped"
