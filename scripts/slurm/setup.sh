#!/usr/bin/env bash
# Install and start a small Slurm (22.05, Debian's slurm-wlm) on this machine, for tests.
#
# Idempotent: a second run with the same configuration and running daemons returns at once.
# Needs root, the Debian package mirrors, and nothing else (no systemd, no cgroups: the daemons are
# started directly and use proctrack/linuxproc + task/none, which work in containers and gVisor).
#
# What it sets up:
#   - munge (key in /etc/munge/munge.key, munged as the munge user);
#   - /etc/slurm/slurm.conf: STALWART_SLURM_NODES nodes on this host (default 2), each with the
#     real CPU count and RealMemory: one slurmd per node, told apart by its port (Debian's slurmd
#     is built with multiple-slurmd support: `slurmd -N <node>`, NodeName ... Port=...). Node 1
#     is named after `hostname -s`, the others `<hostname>-2`...; partitions `debug` (default)
#     and `urgent` (a higher PriorityTier that preempts `debug` jobs by requeueing them) hold
#     every node; no slurmdbd: accounting_storage/none plus jobcomp/filetxt, so finished jobs
#     are read with `sacct --completion`;
#   - slurmctld and the slurmds, logs in /var/log/slurm.
#
# Environment:
#   STALWART_SLURM_NODES=N      nodes (slurmd daemons) on this host, default 2. Several nodes
#                              overcommit the CPUs (each declares them all); they exist so
#                              multi-node jobs (srun on 2 nodes) run for real.
#   STALWART_SLURM_FAKE_GPUS=N  also declare N fake GPUs on each node (GRES gpu:fake:N backed by
#                              empty files /run/slurm/<node>-fakegpuI): jobs can request them
#                              with --gpus-per-node and get SLURM_GPUS_ON_NODE; nothing is
#                              there. Default 0.
#   STALWART_SLURM_TIMEOUT=S    seconds to wait for the node to become idle (default 60).
#
# Stop it with scripts/slurm/stop.sh.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: must run as root (it installs packages and starts daemons)" >&2
    exit 1
fi

here=$(cd "$(dirname "$0")" && pwd)
fake_gpus=${STALWART_SLURM_FAKE_GPUS:-0}
node_count=${STALWART_SLURM_NODES:-2}
wait_s=${STALWART_SLURM_TIMEOUT:-60}
conf_dir=/etc/slurm
log_dir=/var/log/slurm
start=$(date +%s)

log() { echo "[slurm setup +$(($(date +%s) - start))s] $*"; }

# --- packages --------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge"
    source "$here/../apt-lock.sh"
    export DEBIAN_FRONTEND=noninteractive
    apt_locked apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null \
        || { apt_locked apt-get update >/dev/null \
             && apt_locked apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null; }
fi

# --- configuration ---------------------------------------------------------------------------
node=$(hostname -s)
nodes=("$node")
for ((i = 2; i <= node_count; i++)); do
    nodes+=("${node}-$i")
done
node_list=$(IFS=,; echo "${nodes[*]}")
cpus=$(nproc --all)
mem_mb=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
# Leave some memory for the OS so Slurm never believes it may hand out everything.
real_mem=$((mem_mb > 2048 ? mem_mb - 1024 : mem_mb))

gres_node=""
gres_types=""
if [[ $fake_gpus -gt 0 ]]; then
    gres_types="GresTypes=gpu"
    gres_node=" Gres=gpu:fake:${fake_gpus}"
fi
node_lines=""
port=6818
for name in "${nodes[@]}"; do
    node_lines+="NodeName=${name} NodeHostname=${node} NodeAddr=127.0.0.1 Port=${port} CPUs=${cpus} RealMemory=${real_mem}${gres_node} State=UNKNOWN"$'\n'
    port=$((port + 1))
done

mkdir -p "$conf_dir" "$log_dir" /var/spool/slurmctld /run/slurm
for name in "${nodes[@]}"; do
    mkdir -p "/var/spool/slurmd/$name"
done
new_conf=$(cat <<EOF
# Written by stalwart scripts/slurm/setup.sh: a single-node Slurm for tests.
ClusterName=stalwart
SlurmctldHost=${node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=${log_dir}/slurmctld.log
SlurmdLogFile=${log_dir}/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
MpiDefault=none
# No cgroups: they are not available in containers / gVisor.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
# Short timers keep tests fast.
KillWait=3
MinJobAge=60
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
Waittime=0
# Preemption: an \`urgent\` job requeues \`debug\` jobs (lets tests provoke PREEMPTED/requeue).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
# No slurmdbd: finished jobs come from the job completion file (sacct --completion).
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${log_dir}/jobcomp.log
${gres_types}
${node_lines}PartitionName=debug Nodes=${node_list} Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=${node_list} MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=off
EOF
)
gres_conf="# no GRES"
if [[ $fake_gpus -gt 0 ]]; then
    gres_conf=""
    for name in "${nodes[@]}"; do
        gres_conf+="NodeName=${name} Name=gpu Type=fake File=/run/slurm/${name}-fakegpu[0-$((fake_gpus - 1))]"$'\n'
    done
fi
gres_conf=${gres_conf%$'\n'}

changed=0
if [[ ! -f $conf_dir/slurm.conf ]] || [[ "$(cat "$conf_dir/slurm.conf")" != "$new_conf" ]]; then
    printf '%s\n' "$new_conf" >"$conf_dir/slurm.conf"
    changed=1
fi
if [[ ! -f $conf_dir/gres.conf ]] || [[ "$(cat "$conf_dir/gres.conf")" != "$gres_conf" ]]; then
    printf '%s\n' "$gres_conf" >"$conf_dir/gres.conf"
    changed=1
fi

# slurmd checks that GPU device files exist: empty files stand in for them.
for name in "${nodes[@]}"; do
    for ((i = 0; i < fake_gpus; i++)); do
        touch "/run/slurm/${name}-fakegpu$i"
    done
done

running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# The state of every node, one word each ("idle idle"), "" when sinfo does not answer.
node_states() { sinfo --noheader --Node --partition=debug --format=%T 2>/dev/null | xargs; }
all_up() {
    local states
    states=$(node_states)
    [[ -n $states ]] || return 1
    [[ $(wc -w <<<"$states") -eq ${#nodes[@]} ]] || return 1
    [[ ! $states =~ (down|drain|unknown|fail|not_responding|future) ]]
}
slurmds_running() {
    local name
    for name in "${nodes[@]}"; do
        running "/run/slurm/slurmd-$name.pid" || return 1
    done
}

if [[ $changed -eq 0 ]] && running /run/slurm/slurmctld.pid && slurmds_running && all_up; then
    log "already running (nodes ${node_list}: $(node_states))"
    exit 0
fi
if [[ $changed -eq 1 ]]; then
    log "configuration written to $conf_dir/slurm.conf (node $node, $cpus CPUs, ${real_mem} MB)"
    # A new configuration needs fresh daemons.
    "$here/stop.sh" --quiet || true
fi

# --- munge ------------------------------------------------------------------------------------
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating munge key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
if ! running /run/munge/munged.pid; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged --force
fi
for _ in $(seq 50); do
    munge -n >/dev/null 2>&1 && break
    sleep 0.1
done
munge -n | unmunge >/dev/null || { echo "setup.sh: munge does not work" >&2; exit 1; }

# --- slurm daemons ----------------------------------------------------------------------------
if ! running /run/slurm/slurmctld.pid; then
    log "starting slurmctld"
    slurmctld
fi
for name in "${nodes[@]}"; do
    if ! running "/run/slurm/slurmd-$name.pid"; then
        log "starting slurmd for node $name"
        slurmd -N "$name"
    fi
done

deadline=$(($(date +%s) + wait_s))
while [[ $(date +%s) -lt $deadline ]]; do
    all_up && break
    if [[ $(node_states) =~ (down|drain) ]]; then
        # A node that was down before (for instance after a reconfiguration) comes back.
        scontrol update nodename="$node_list" state=resume >/dev/null 2>&1 || true
    fi
    sleep 0.5
done
if ! all_up; then
    echo "setup.sh: nodes ${node_list} are not all up after ${wait_s}s (states: '$(node_states)')" >&2
    echo "--- slurmctld.log" >&2; tail -n 20 "$log_dir/slurmctld.log" >&2 || true
    for name in "${nodes[@]}"; do
        echo "--- slurmd-$name.log" >&2; tail -n 20 "$log_dir/slurmd-$name.log" >&2 || true
    done
    exit 1
fi

log "Slurm is up: nodes ${node_list} are $(node_states) ($cpus CPUs each)"
sinfo
echo "Stop it with: $here/stop.sh"
