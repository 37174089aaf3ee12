# RoCE for real, on two QEMU nodes with Soft-RoCE (launch/rocenodes; about
# 4 minutes under TCG; rocenodes_image_test builds the image first):
#   - the doctor, across both nodes over MPI, finds rxe0 ACTIVE on each, the
#     RoCE v2 GID index that carries the node's IPv4 address, the RoCE MTU
#     the interface allows, and recommends that environment;
#   - ib_write_bw moves data from rnode0 to rnode1 over rxe0;
#   - bench comm runs over Open MPI's UCX PML on rxe0, every row correct;
#   - 2-node DDP and FSDP runs over UCX end with the TCP runs' losses, bit for
#     bit, and each run's summary names the transport MPI used.
# Skipped (77) where the nodes cannot run (not root, no QEMU or debootstrap:
# `launch/rocenodes check` says why). Label `rdma`.
source "$(dirname "$0")/lib.sh"
rn="$SOURCE_DIR/launch/rocenodes"
why=$("$rn" check) || { echo "skipped: $why"; exit 77; }
data=$(prep_fmnist)

# The nodes' lines and each step's verdict print as they happen; the limits
# sit inside ctest's, so a stuck run ends with the rocenodes diagnosis.
rc=0
"$rn" run --share "$WORK_ROOT" --boot-timeout 300 --timeout 1000 -- \
  bash "$SOURCE_DIR/tests/integration/rocenodes_guest.sh" \
  "$SHARDTRAIN" "$SOURCE_DIR/examples/fmnist_mlp.toml" "$data" "$WORK" || rc=$?
[ "$rc" -eq 0 ] || fail "the steps on the Soft-RoCE nodes (exit $rc)"

"$PY" - <<'PY' || fail "results"
import json
def load(p): return json.load(open(p))

d = load("doctor.json")
assert [n["host"] for n in d["nodes"]] == ["rnode0", "rnode1"], d["nodes"]
for n in d["nodes"]:
    f = {x["check"]: x for x in n["findings"]}
    assert f["rdma"]["verdict"] == "ok" and "rxe0:1: ACTIVE, RoCE on eth0" in f["rdma"]["detail"], f["rdma"]
    assert f["roce-gid"]["verdict"] == "ok" and "RoCE v2 GID index 1 carries 10.11.0." in f["roce-gid"]["detail"], f["roce-gid"]
    assert f["roce-mtu"]["verdict"] == "warn" and "MTU 1024" in f["roce-mtu"]["detail"], f["roce-mtu"]
    env = {e["name"]: e["value"] for e in n["environment"]}
    assert env["NCCL_IB_GID_INDEX"] == "1" and env["UCX_NET_DEVICES"] == "rxe0:1" and env["OMPI_MCA_pml"] == "ucx", env
assert d["across_nodes"] == [], d["across_nodes"]
print("ok   doctor: both nodes rxe0:1 ACTIVE, RoCE v2 GID index 1, MTU 1024 warned, the same environment")

bw = [l.split() for l in open("ib_write_bw.txt") if l.strip().startswith("65536")]
assert bw and float(bw[0][3]) > 0, open("ib_write_bw.txt").read()
print(f"ok   ib_write_bw 64 KiB: {bw[0][3]} Gb/s average")

rows = load("comm-ucx.json")
assert rows and all(r["ok"] for r in rows), rows
print("ok   bench comm over UCX/rxe0: every row correct")

def losses(run): return [json.loads(l)["test_loss"] for l in open(f"{run}/metrics.jsonl")]
for s in ("ddp", "fsdp"):
    assert losses(f"{s}-ucx") == losses(f"{s}-tcp"), (s, losses(f"{s}-ucx"), losses(f"{s}-tcp"))
    ucx = load(f"{s}-ucx/summary.json")["doctor"]["mpi_transport"]
    tcp = load(f"{s}-tcp/summary.json")["doctor"]["mpi_transport"]
    assert ucx.startswith("UCX (pml = ucx) on rxe0:1"), ucx
    assert tcp.startswith("ob1 over TCP"), tcp
    print(f"ok   {s}: UCX and TCP runs end with the same test loss {losses(s + '-ucx')[-1]!r}; summary: {ucx}")
PY
