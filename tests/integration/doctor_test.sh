# `shardtrain doctor`: on this machine (one rank, text and JSON), and on three
# ranks that each read a fixture node (MPMD: one --sysroot per rank) where the
# middle node's RoCE port is down: the findings meet on rank 0 over MPI,
# which names that node and exits 1.
source "$(dirname "$0")/lib.sh"

"$SHARDTRAIN" doctor --data "$SOURCE_DIR/examples" >here.txt 2>&1 || { cat here.txt; fail "doctor on this machine"; }
grep -q '^shardtrain doctor: 1 node, 1 rank' here.txt || { cat here.txt; fail "summary line"; }
grep -q 'mpi-transport' here.txt || { cat here.txt; fail "the MPI transport check"; }
grep -q 'data-fs .*examples on ' here.txt || { cat here.txt; fail "the data's file system"; }
pass "this machine: $(head -1 here.txt)"

"$SHARDTRAIN" doctor --json --quick --out saved.json >here.json || fail "doctor --json"
"$PY" - here.json saved.json <<'PY' || fail "doctor --json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j == json.load(open(sys.argv[2])), "--out writes what --json prints"
node = j["nodes"][0]
assert node["ranks"] == [0] and node["host"], node
checks = {f["check"] for f in node["findings"]}
assert {"rdma", "gpus", "mpi-transport"} <= checks, checks
assert all(f["verdict"] in ("ok", "warn", "fail") for f in node["findings"])
assert "open_mpi" in node["facts"] and "rdma" in node["facts"]
PY
pass "--json: every finding has a verdict; --out holds the same"

# A RoCE node in sysfs terms: rxe0 on ens3 (MTU 9000) with IPv4 GIDs
# (v2 with the address at index 3), its port ACTIVE or DOWN.
make_node() {
  local root="$1" host="$2" state="$3" ip_tail="$4"
  local port="$root/sys/class/infiniband/rxe0/ports/1"
  mkdir -p "$root/proc/sys/kernel" "$root/sys/class/net/ens3" "$port/gids" "$port/gid_attrs/types" "$port/gid_attrs/ndevs"
  echo "$host" >"$root/proc/sys/kernel/hostname"
  echo ens3 >"$root/sys/class/infiniband/rxe0/parent"
  echo 9000 >"$root/sys/class/net/ens3/mtu"
  echo "$state" >"$port/state"
  echo Ethernet >"$port/link_layer"
  local gids=(fe80:0000:0000:0000:5054:00ff:fe12:3456 fe80:0000:0000:0000:5054:00ff:fe12:3456
              "0000:0000:0000:0000:0000:ffff:$ip_tail" "0000:0000:0000:0000:0000:ffff:$ip_tail")
  local types=("IB/RoCE v1" "RoCE v2" "IB/RoCE v1" "RoCE v2")
  for i in 0 1 2 3; do
    echo "${gids[$i]}" >"$port/gids/$i"
    echo "${types[$i]}" >"$port/gid_attrs/types/$i"
    echo ens3 >"$port/gid_attrs/ndevs/$i"
  done
}
make_node node-a node-a "4: ACTIVE" 0a00:0001
make_node node-b node-b "1: DOWN" 0a00:0002
make_node node-c node-c "4: ACTIVE" 0a00:0003

rc=0
# shellcheck disable=SC2046  # mpirun_cmd's flags are split on purpose
timeout 120 $(mpirun_cmd) -np 1 "$SHARDTRAIN" doctor --sysroot node-a : -np 1 "$SHARDTRAIN" doctor --sysroot node-b \
  : -np 1 "$SHARDTRAIN" doctor --sysroot node-c >three.txt 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat three.txt; fail "doctor exited $rc with a failed node, expected 1"; }
grep -q '^shardtrain doctor: 3 nodes, 3 ranks' three.txt || { cat three.txt; fail "three nodes"; }
grep -q 'roce-gid .*rxe0:1: RoCE v2 GID index 3 carries 10.0.0.1 on ens3' three.txt ||
  { cat three.txt; fail "node-a's GID"; }
grep -q 'rdma.active_ports differs across nodes' three.txt || { cat three.txt; fail "the difference"; }
grep -q 'check the odd node(s) out: node-b' three.txt || { cat three.txt; fail "node-b named"; }
grep -q 'export NCCL_IB_GID_INDEX=3' three.txt || { cat three.txt; fail "the recommended GID index"; }
pass "3 ranks, 3 fixture nodes: node-b's down port named on rank 0"

expect_error "doctor: --sysroot no-such-dir is not a directory" "$SHARDTRAIN" doctor --sysroot no-such-dir
