# Slurm for real: a one-node Slurm (Debian's slurmctld, slurmd and munge,
# configured here with 4 CPUs declared on this host) takes two sbatch jobs
# that run launch/shardrun, which picks srun --mpi=pmix:
#   1. 2 ranks of DDP to a finished run (world size 2 in result.json);
#   2. the same job requeued mid-run with `scontrol requeue`: Slurm's SIGTERM
#      stops both ranks after a step with a checkpoint, Slurm runs the script
#      again and `--resume auto` ends with an uninterrupted run's final test
#      loss, bit for bit.
# Skipped (77) where Slurm is not installed or this is not root (slurmd
# must start jobs as their user).
source "$(dirname "$0")/lib.sh"
for tool in slurmctld slurmd munged sbatch srun scontrol sinfo; do
  command -v "$tool" >/dev/null 2>&1 || { echo "skipped: $tool not found (scripts/install-deps.sh installs Slurm)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: a private slurmd needs root"; exit 77; }
data=$(prep_fmnist)

dir="$WORK/slurm"
mkdir -p "$dir/state" "$dir/spool"
host=$(hostname -s)
# Ports of its own, so a Slurm on this machine (or another test's) is not disturbed.
base=$(( 20000 + ($$ % 600) * 64 ))
pids=()
cleanup() {
  scancel --full --quiet -u root 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# munge with a key and socket of its own.
head -c 1024 /dev/urandom >"$dir/munge.key"
chmod 400 "$dir/munge.key"
munged --force --key-file="$dir/munge.key" --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" || { cat "$dir/munged.log"; fail "munged"; }
pids+=("$(cat "$dir/munged.pid")")

export SLURM_CONF="$dir/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=shardtrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$(( base + 1 ))
SrunPortRange=$(( base + 2 ))-$(( base + 63 ))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
SlurmUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
KillWait=60
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$dir/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || { tail "$dir"/slurm*.log "$dir"/*.out; fail "the node did not come up idle (state '$state')"; }
srun --mpi=list 2>&1 | grep -qw pmix || { srun --mpi=list; fail "this Slurm has no PMIx plugin"; }
pass "one-node Slurm up: $host idle, 4 CPUs, PMIx"

cfg="$SOURCE_DIR/examples/fmnist_mlp.toml"
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=2560
        --set data.test_limit=2000 --set train.epochs=2 --set target.value=0 --set optim.kind=adamw
        --set optim.lr=0.002 --set comm.timeout_s=60 --set checkpoint.on_signal=true)

# job SCRIPT_BODY: an sbatch script of 2 tasks running the body.
job() {
  printf '#!/usr/bin/env bash\nset -euo pipefail\n%s\n' "$1"
}

# job_state ID: the job's state (PENDING, RUNNING, COMPLETED, ...).
job_state() {
  scontrol show job "$1" -o | grep -o 'JobState=[A-Z_]*' | cut -d= -f2
}

# 1. A finished 2-rank run through sbatch -> shardrun -> srun. Polled rather
# than `sbatch --wait`, which looks at the job after 2, 10 and 42 s: a job
# done at 12 s was waited on for 30 s more.
job "\"$SOURCE_DIR/launch/shardrun\" -n 2 -- \"$SHARDTRAIN\" train \"$cfg\" $(printf '%q ' "${common[@]}") --run-dir \"$WORK/run1\"" >job-1
id=$(sbatch --parsable -n 2 -o "$WORK/one.out" job-1)
for _ in $(seq 1200); do
  state=$(job_state "$id")
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 0.25
done
[ "$state" = COMPLETED ] || { cat one.out; fail "sbatch job 1: state $state"; }
grep -q 'shardrun: .*srun --ntasks=2 --kill-on-bad-exit=1 --mpi=pmix --cpu-bind=none' one.out ||
  { cat one.out; fail "shardrun chose srun with PMIx"; }
[ "$(json_get run1/result.json 'j["world_size"]')" = 2 ] || { cat one.out; fail "world size under srun"; }
[ "$(json_get run1/result.json 'j["status"]')" = completed ] || { cat one.out; fail "job 1 did not complete"; }
ref=$(json_get run1/result.json 'repr(j["final"]["test_loss"])')
pass "sbatch -> shardrun -> srun --mpi=pmix: 2 ranks, 40 steps, final test_loss $ref"

# 2. The same job requeued mid-run. Rank 1 takes 150 ms more per step, so
# that the requeue comes while it trains (a wait changes no value: job 1's
# result stays the reference).
slow=(--set debug.slow_rank=1 --set debug.slow_compute_ms=150)
job "\"$SOURCE_DIR/launch/shardrun\" -n 2 -- \"$SHARDTRAIN\" train \"$cfg\" $(printf '%q ' "${common[@]}" "${slow[@]}") --run-dir \"$WORK/run2\" --resume auto" >job-2
id=$(sbatch --parsable --requeue --open-mode=append -n 2 -o "$WORK/two.out" job-2)
for _ in $(seq 600); do  # until steps are running (the slow rank's 150 ms make 40 steps last 6 s or more)
  [ -s run2/telemetry/rank-00000.jsonl ] || grep -q '^\[train\]' two.out 2>/dev/null && break
  sleep 0.1
done
grep -q '^\[train\]' two.out || { cat two.out; fail "job 2 never started training"; }
scontrol requeue "$id" || fail "scontrol requeue $id"
for _ in $(seq 300); do
  state=$(job_state "$id")
  # A requeued job waits for its begin time; let it start now.
  [ "$state" = PENDING ] && scontrol update JobId="$id" StartTime=now 2>/dev/null || true
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
  sleep 1
done
restarts=$(scontrol show job "$id" -o | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
[ "$state" = COMPLETED ] && [ "$restarts" = 1 ] || { cat two.out; fail "job 2: state $state after $restarts restart(s)"; }
grep -q '^\[preempted\] SIGTERM: every rank stopped after step' two.out || { cat two.out; fail "no checkpoint on requeue"; }
grep -q '^\[resume\] .*/step-[0-9]*\.h5: step [1-9]' two.out || { cat two.out; fail "the second run did not resume"; }
got=$(json_get run2/result.json 'repr(j["final"]["test_loss"])')
[ "$got" = "$ref" ] || { cat two.out; fail "requeued run ended with test_loss $got, uninterrupted $ref"; }
pass "requeued at $(grep -o 'stopped after step [0-9]*' two.out | head -1), resumed: final test_loss $got (bit-identical)"
