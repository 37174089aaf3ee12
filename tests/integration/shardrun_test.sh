# launch/shardrun: the command it builds for a hostfile, ranks per node,
# binding and each fabric mode (--dry-run); a fabric that is not here and
# bad values refused with exit 2; and a real 2-rank job whose ranks place
# themselves (--bind auto), each placement in the run log and doctor.json.
source "$(dirname "$0")/lib.sh"
shardrun="$SOURCE_DIR/launch/shardrun"
data=$(prep_fmnist)

# dry COMMAND...: shardrun's printed command line.
dry() { "$shardrun" --dry-run "$@" 2>&1 >/dev/null | grep '^shardrun: '; }

printf 'localhost slots=2\n' >hosts
line=$(dry -n 4 --ppn 2 --hostfile hosts -- "$SHARDTRAIN" info)
case "$line" in *"mpirun -np 4 --bind-to none --hostfile hosts --map-by ppr:2:node"*) ;; *) fail "hostfile and ppn: $line" ;; esac
case "$line" in *--oversubscribe*) fail "a hostfile's slots decide, not --oversubscribe: $line" ;; esac
case "$line" in *"SHARDTRAIN_BIND=auto "*"-x SHARDTRAIN_BIND"*) ;; *) fail "--bind auto is passed to the ranks: $line" ;; esac
pass "hostfile, ppn: $line"
# Without -n: the hostfile's hosts (comments and blank lines aside) x --ppn.
printf '# two nodes\nnodeA slots=4\n\nnodeB slots=4\n' >hosts2
line=$(dry --ppn 4 --hostfile hosts2 -- "$SHARDTRAIN" info | tail -1)
case "$line" in *"mpirun -np 8 "*"--map-by ppr:4:node"*) ;; *) fail "-n from the hostfile and --ppn: $line" ;; esac
pass "-n derived from 2 hosts x --ppn 4: $line"

line=$(dry -n 2 --bind none -- "$SHARDTRAIN" info)
case "$line" in *SHARDTRAIN_BIND*) fail "--bind none: $line" ;; esac
line=$(dry -n 2 --fabric tcp -- "$SHARDTRAIN" info)
case "$line" in *"NCCL_IB_DISABLE=1"*"OMPI_MCA_pml=ob1"*"-x OMPI_MCA_pml"*) ;; *) fail "--fabric tcp: $line" ;; esac
pass "--fabric tcp: $line"
line=$(OMPI_MCA_pml=ob1 NCCL_SOCKET_IFNAME=lo dry -n 2 --fabric auto -- "$SHARDTRAIN" info)
case "$line" in *"NCCL_SOCKET_IFNAME=lo "*) ;; *) fail "--fabric auto keeps what the user set: $line" ;; esac
pass "--fabric auto keeps the user's NCCL_SOCKET_IFNAME: $line"

refused() {  # refused "message" args...: exit 2 and the message
  local want="$1" rc=0
  shift
  "$shardrun" --dry-run "$@" >out.txt 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep -qF -- "$want" out.txt || { cat out.txt; fail "'$*' exited $rc, expected 2 and '$want'"; }
}
if [ ! -d /sys/class/infiniband ] || [ -z "$(ls /sys/class/infiniband)" ]; then
  refused "--fabric roce: no roce port is ACTIVE" -n 2 --fabric roce -- "$SHARDTRAIN" info
  pass "--fabric roce refused where no RoCE port is up"
fi
refused "--ppn must be a positive integer" -n 2 --ppn 0 -- true
refused "--bind must be auto or none" -n 2 --bind numa -- true
refused "--fabric must be none, auto, tcp, roce or ib" -n 2 --fabric rdma -- true
refused "--hostfile nope cannot be read" -n 2 --hostfile nope -- true
refused "needs a value" -n 2 --ppn
refused "-n RANKS must be a positive integer, got '' (or give --hostfile and --ppn)" --ppn 2 -- true
pass "bad values refused with exit 2"

# A real job: each rank placed, the placements in the log and doctor.json.
"$shardrun" -n 2 --ppn 2 --hostfile hosts -- "$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" \
  --set "data.train=$data/train" --set "data.test=$data/test" --set train.max_steps=2 --set data.train_limit=2048 \
  --run-dir run >run.txt 2>&1 || { cat run.txt; fail "2-rank job"; }
grep -q '^\[init\] doctor: 1 node, 2 ranks' run.txt || { cat run.txt; fail "the doctor's line"; }
for r in 0 1; do
  grep -q "^\[init\] binding: rank $r on .*: local rank $r/2" run.txt || { cat run.txt; fail "rank $r's placement"; }
done
"$PY" - run/doctor.json <<'PY' || fail "doctor.json"
import json, sys
j = json.load(open(sys.argv[1]))
assert [b["rank"] for b in j["bindings"]] == [0, 1], j["bindings"]
assert all(b["placed"].startswith(f"local rank {b['rank']}/2") and b["cpus"] for b in j["bindings"]), j["bindings"]
assert j["nodes"][0]["ranks"] == [0, 1]
PY
grep -q '^\[summary\] doctor: 1 node, 2 ranks' run.txt || { cat run.txt; fail "the summary's doctor line"; }
pass "2 ranks placed: $(grep -c '^\[init\] binding' run.txt) binding lines, doctor.json has both"
