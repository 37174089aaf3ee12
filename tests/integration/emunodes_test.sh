# Emulated multi-node (launch/emunodes): 2 nodes as network namespaces on a
# bridge, 4 ranks (2 per node). Checks that the ranks sit in two namespaces,
# that MPI_COMM_TYPE_SHARED groups them by node, that traffic between nodes
# crosses the veth links (their byte counters) while traffic within a node
# does not touch the network, that tc shaping slows transfers between nodes,
# that the job's exit status comes back, and that `down` leaves nothing behind.
# Skips (77) where namespaces cannot be made (not root, no CAP_SYS_ADMIN, ...).
source "$(dirname "$0")/lib.sh"
require_emunodes
command -v mpicc >/dev/null || fail "mpicc not found (libopenmpi-dev; scripts/install-deps.sh)"

# One prefix per test process: parallel runs never share names. The subnet is
# picked by `up` under a lock among those free. Clusters of earlier runs that
# were killed before their trap ran (ctest timeout) are collected by gc.
P="st$$n"
"$EMU" gc
trap '"$EMU" down --prefix "$P" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
"$EMU" up 2 --prefix "$P" --owner-pid $$
pass "up: 2 nodes ${P}0, ${P}1"

mpicc -O2 -o probe "$SOURCE_DIR/tests/integration/emunodes_probe.c"

# kv KEY < line: the value of KEY=VALUE in a "probe ..." line
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
line() { grep "^probe $2" "$1" || fail "no 'probe $2' line in $1: $(cat "$1")"; }
counter() { cat "/sys/class/net/$1/statistics/$2"; }

# --- 4 ranks, 2 per node, 16 MiB between nodes --------------------------------------
mib16=$((16 << 20))
v0_rx=$(counter "$P-v0" rx_bytes) v1_tx=$(counter "$P-v1" tx_bytes)
timeout 60 "$EMU" run --prefix "$P" -n 4 -- ./probe --bytes $mib16 >plain.txt 2>plain.err ||
  { cat plain.txt plain.err >&2; fail "emunodes run of the probe failed"; }
cat plain.txt
v0_rx=$(($(counter "$P-v0" rx_bytes) - v0_rx)) v1_tx=$(($(counter "$P-v1" tx_bytes) - v1_tx))

# (a) ranks 0-1 in one namespace, 2-3 in another, neither the test's own
my_ns=$(stat -L -c %i /proc/self/ns/net)
ns=() host=() group=() lsize=()
for r in 0 1 2 3; do
  l=$(line plain.txt "rank=$r ")
  ns[r]=$(kv netns <<<"$l") host[r]=$(kv host <<<"$l") group[r]=$(kv group <<<"$l") lsize[r]=$(kv local_size <<<"$l")
done
[ "${ns[0]}" = "${ns[1]}" ] && [ "${ns[2]}" = "${ns[3]}" ] ||
  fail "ranks on one node are in different namespaces: ${ns[*]}"
[ "${ns[0]}" != "${ns[2]}" ] || fail "ranks 0 and 2 share namespace ${ns[0]}: the nodes are not separated"
[ "${ns[0]}" != "$my_ns" ] && [ "${ns[2]}" != "$my_ns" ] || fail "a rank runs in the root namespace ($my_ns)"
[ "${host[*]}" = "${P}0 ${P}0 ${P}1 ${P}1" ] || fail "hostnames ${host[*]}, expected ${P}0 ${P}0 ${P}1 ${P}1"
pass "namespaces: ranks 0,1 in net:[${ns[0]}] (${host[0]}), ranks 2,3 in net:[${ns[2]}] (${host[2]}); test in net:[$my_ns]"

# (b) MPI_COMM_TYPE_SHARED: two groups of two, by node
[ "${group[*]}" = "0 0 2 2" ] && [ "${lsize[*]}" = "2 2 2 2" ] ||
  fail "split_type(SHARED) groups ${group[*]} sizes ${lsize[*]}, expected groups 0 0 2 2 of size 2"
pass "split_type(SHARED): {0,1} and {2,3}"

# (c) between nodes: the 16 MiB each way show in both namespaces' eth0 and on the
# root-side veths; within a node: neither eth0 nor lo moves (shared memory).
inter=$(line plain.txt "exchange=inter")
intra=$(line plain.txt "exchange=intra")
[ "$(kv peer <<<"$inter")" = 2 ] || fail "inter-node peer of rank 0 is not rank 2: $inter"
[ "$(kv net_tx <<<"$inter")" -ge $mib16 ] && [ "$(kv net_rx <<<"$inter")" -ge $mib16 ] ||
  fail "16 MiB each way between nodes, but ${P}0's eth0 counted less: $inter"
[ "$v0_rx" -ge $mib16 ] && [ "$v1_tx" -ge $mib16 ] ||
  fail "root-side veth counters grew by $P-v0 rx $v0_rx, $P-v1 tx $v1_tx bytes, expected >= $mib16"
pass "between nodes: ${P}0 eth0 tx $(kv net_tx <<<"$inter") rx $(kv net_rx <<<"$inter") bytes; $P-v0 rx +$v0_rx, $P-v1 tx +$v1_tx"
[ $(($(kv net_tx <<<"$intra") + $(kv net_rx <<<"$intra") + $(kv lo <<<"$intra"))) -lt $((1 << 20)) ] ||
  fail "16 MiB within a node moved network bytes (not shared memory?): $intra"
pass "within a node: eth0 $(($(kv net_tx <<<"$intra") + $(kv net_rx <<<"$intra"))) bytes, lo $(kv lo <<<"$intra") bytes for 16 MiB each way"

# (d) shaping: 100 Mbit/s is 12.5 MB/s; unshaped veths move far more.
bps() { awk -v b="$(kv bytes <<<"$1")" -v s="$(kv "$2" <<<"$1")" 'BEGIN { printf "%.0f", b / s }'; }
plain_bps=$(bps "$inter" seconds_out)
"$EMU" up 2 --prefix "$P" --rate 100mbit
ip netns exec "${P}0" tc qdisc show dev eth0 | grep -q "tbf.*rate 100Mbit" || fail "no tbf on ${P}0's eth0"
mib4=$((4 << 20))
timeout 60 "$EMU" run --prefix "$P" -n 4 -- ./probe --bytes $mib4 >shaped.txt 2>shaped.err ||
  { cat shaped.txt shaped.err >&2; fail "emunodes run of the probe on shaped links failed"; }
shaped=$(line shaped.txt "exchange=inter")
shaped_bps=$(bps "$shaped" seconds_out)
echo "between nodes, one way: unshaped $(bps "$inter" seconds_out) / $(bps "$inter" seconds_in) B/s (out/in)," \
  "--rate 100mbit $shaped_bps / $(bps "$shaped" seconds_in) B/s (100 Mbit/s is 12500000 B/s)"
[ "$shaped_bps" -le 18750000 ] || fail "shaped to 100 Mbit/s, the transfer still ran at $shaped_bps B/s: $shaped"
[ "$plain_bps" -ge $((3 * shaped_bps)) ] || fail "unshaped $plain_bps B/s is not clearly faster than shaped $shaped_bps B/s"
pass "shaping slows transfers between nodes"

# The job's exit status comes back through emunodes run.
rc=0
timeout 60 "$EMU" run --prefix "$P" -n 2 -- sh -c 'exit 3' >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "a job whose ranks exit 3 made emunodes run exit $rc"
pass "exit status 3 propagates"

# --- down leaves nothing, and is idempotent -------------------------------------------
"$EMU" down --prefix "$P"
left=$(ip netns list | grep -E "^${P}[0-9]+( |$)" || true)
left+=$(ip -o link show | grep -E ": $P-(br|v[0-9]+)[@:]" || true)
[ -z "$left" ] || fail "down left behind: $left"
[ ! -e "${EMUNODES_STATE_ROOT:-/run/shardtrain-emunodes}/$P" ] || fail "down left its state directory"
"$EMU" down --prefix "$P" | grep -q "nothing to remove" || fail "a second down did not say 'nothing to remove'"
pass "down removed the namespaces, links, bridge and state"
