# What tests/integration/rocenodes_test.sh runs on node 0 of launch/rocenodes
# (two QEMU nodes with Soft-RoCE), writing every result into the shared
# folder OUT for the host to check:
#   doctor.json / doctor.txt   `shardtrain doctor` across both nodes
#   ib_write_bw.txt            RDMA writes from rnode0 to rnode1 over rxe0
#   comm-ucx.json              `bench comm` over UCX on RoCE
#   ddp-ucx/, ddp-tcp/, fsdp-ucx/, fsdp-tcp/  2-node runs of the MLP
# Arguments: SHARDTRAIN CONFIG DATA OUT. Each step's output goes to OUT/<step>.log.
set -uo pipefail
st="$1" cfg="$2" data="$3" out="$4"
cd "$out" || exit 1
hosts="${ROCENODES:?run by launch/rocenodes}"
mpirun=(mpirun --allow-run-as-root --host "$hosts" -np 2 --bind-to none)
# Open MPI over UCX on the RoCE port (Debian's configuration rules UCX out;
# UCX 1.13's UD transport needs the DGID check off on rxe, and UCP needs UD
# to wire up RC).
ucx=(--mca pml ucx -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_UD_VERBS_ETH_DGID_CHECK=n)
tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0)
failed=0
# step NAME CMD...: run with a time limit, log to NAME.log, note a failure
# and go on. Each step takes well under a minute on TCG nodes; the limit
# turns a hang into a failure that names its step.
step() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "..   $name"
  timeout -k 10 300 "$@" >"$name.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "ok   $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name ($([ "$rc" = 124 ] && echo "no end within 300 s" || echo "exit $rc"), $((SECONDS - start)) s): tail of $name.log:"
    tail -15 "$name.log"
    failed=1
  fi
}

step doctor "${mpirun[@]}" "$st" doctor --out doctor.json
cp doctor.log doctor.txt

# ib_write_bw: the server on rnode1, the client here; GID index 1 is the
# IPv4 RoCE v2 entry (the doctor's NCCL_IB_GID_INDEX, checked on the host).
# The server listens only once ssh has started it on the other node, which
# under software emulation takes anywhere from under a second to well over
# three: the client retries while the connection is refused (nothing has
# crossed the fabric yet), and any other failure ends it.
ib_client() {
  local i
  for i in $(seq 60); do
    ib_write_bw "$@" >ib_write_bw.try 2>&1 && { cat ib_write_bw.try; return 0; }
    grep -q "Couldn't connect" ib_write_bw.try || break
    sleep 1
  done
  cat ib_write_bw.try
  return 1
}
export -f ib_client
ssh rnode1 "timeout 300 ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 --report_gbits" >ib_write_bw_server.log 2>&1 &
server=$!
step ib_write_bw bash -c 'ib_client "$@"' ib_client -d rxe0 -x 1 -s 65536 -n 200 --report_gbits rnode1
wait "$server" || true
cp ib_write_bw.log ib_write_bw.txt

# via TRANSPORT: sets `over` to the 2-node mpirun over ucx or tcp.
via() { if [ "$1" = ucx ]; then over=("${mpirun[@]}" "${ucx[@]}"); else over=("${mpirun[@]}" "${tcp[@]}"); fi; }
# Over UCX only: the TCP path is the one every other MPI test takes, and the
# training runs below compare the two transports bit for bit.
via ucx
step comm-ucx "${over[@]}" "$st" bench comm --ops allreduce,allgather --sizes 64K,256K \
  --iters 2 --rounds 2 --json comm-ucx.json

# A narrow MLP (101 k parameters): RDMA in software under TCG moves a few
# MB/s, and the check is equality, not speed.
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=1024
        --set data.test_limit=128 --set train.max_steps=2 --set train.epochs=1 --set target.value=0
        --set "model.hidden=[128]" --set '~parallel.ddp')
for strategy in ddp fsdp; do
  for t in ucx tcp; do
    via "$t"
    step "$strategy-$t" "${over[@]}" "$st" train "$cfg" \
      "${common[@]}" --set "parallel.strategy=$strategy" --run-dir "$strategy-$t" --overwrite
  done
done
exit "$failed"
