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
# --fabric: every rank resolves its node's environment (launch/fabric-env)
# before the program; what the user set is kept and passed along.
line=$(NCCL_SOCKET_IFNAME=lo dry -n 2 --fabric tcp -- "$SHARDTRAIN" info)
case "$line" in *"-x NCCL_SOCKET_IFNAME"*"fabric-env tcp -- $SHARDTRAIN info"*) ;; *) fail "--fabric tcp: $line" ;; esac
pass "--fabric tcp: $line"
"$shardrun" -n 2 --fabric tcp -- sh -c 'echo "env: $NCCL_IB_DISABLE $OMPI_MCA_pml $OMPI_MCA_btl"' >out.txt 2>&1 ||
  { cat out.txt; fail "--fabric tcp: the job failed"; }
[ "$(grep -c '^env: 1 ob1 tcp,vader,self$' out.txt)" -eq 2 ] || { cat out.txt; fail "--fabric tcp: not on both ranks"; }
pass "--fabric tcp: both ranks run with NCCL_IB_DISABLE=1, ob1 over tcp"
NCCL_SOCKET_IFNAME=lo "$shardrun" -n 2 --fabric auto -- sh -c 'echo "if: $NCCL_SOCKET_IFNAME"' >out.txt 2>&1 ||
  { cat out.txt; fail "--fabric auto: the job failed"; }
[ "$(grep -c '^if: lo$' out.txt)" -eq 2 ] && [ "$(grep -c 'keeping NCCL_SOCKET_IFNAME=lo' out.txt)" -eq 1 ] ||
  { cat out.txt; fail "--fabric auto: the user's NCCL_SOCKET_IFNAME, one notice per node"; }
pass "--fabric auto keeps the user's NCCL_SOCKET_IFNAME, one notice"

# Per node, not the launching node's: in a network namespace whose only
# interface is fab7, the rank's NCCL_SOCKET_IFNAME is fab7 (root only).
ns=stfab$$
if [ "$(id -u)" -eq 0 ] && ip netns add "$ns" 2>/dev/null; then
  trap 'ip netns del "$ns" 2>/dev/null' EXIT
  ip link add "${ns}v" type veth peer name fab7 netns "$ns" && ip link set "${ns}v" up &&
    ip -n "$ns" addr add 10.77.0.2/24 dev fab7 && ip -n "$ns" link set fab7 up && ip -n "$ns" link set lo up &&
    ip -n "$ns" route add default via 10.77.0.1 || fail "could not make the test's namespace"
  here=$("$SOURCE_DIR/launch/fabric-env" auto -- sh -c 'echo "$NCCL_SOCKET_IFNAME"')
  there=$(ip netns exec "$ns" "$SOURCE_DIR/launch/fabric-env" auto -- sh -c 'echo "$NCCL_SOCKET_IFNAME"')
  [ "$there" = fab7 ] && [ "$here" != fab7 ] || fail "--fabric auto in another namespace: '$there' (here: '$here')"
  ip netns del "$ns"
  trap - EXIT
  pass "--fabric auto resolved per node: $here here, $there in a namespace whose interface is fab7"
fi

refused() {  # refused "message" args...: exit 2 and the message
  local want="$1" rc=0
  shift
  "$shardrun" --dry-run "$@" >out.txt 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep -qF -- "$want" out.txt || { cat out.txt; fail "'$*' exited $rc, expected 2 and '$want'"; }
}
if [ ! -d /sys/class/infiniband ] || [ -z "$(ls /sys/class/infiniband)" ]; then
  rc=0
  "$shardrun" -n 2 --fabric roce -- "$SHARDTRAIN" info >out.txt 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && grep -q -- "--fabric roce: no roce port is ACTIVE" out.txt || { cat out.txt; fail "--fabric roce ran"; }
  pass "--fabric roce refused on a node where no RoCE port is up"
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
