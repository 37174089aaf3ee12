# The Soft-RoCE nodes' image (launch/rocenodes-image), built once per
# machine into ROCENODES_CACHE and reused: the setup of rocenodes_test, run
# on its own so that a slow package archive shows as this test's time and
# progress, not as a boot test that never ends. Checks that the image holds
# what the nodes boot with: the guest kernel and its rdma_rxe module, the
# stub init, rdma-core's and perftest's tools, UCX, Open MPI and the shared
# SSH key. Skipped (77) where the nodes cannot run here.
source "$(dirname "$0")/lib.sh"
rn="$SOURCE_DIR/launch/rocenodes"
why=$("$rn" check) || { echo "skipped: $why"; exit 77; }
echo "$why"
start=$SECONDS
"$rn" image
echo "image ready ($((SECONDS - start)) s)"

cache=$("$rn" image-dir)
for f in ready vmlinuz initrd.img root.img; do
  [ -f "$cache/$f" ] || fail "the image has no $f in $cache"
done
# Read the ext4 image without mounting it (debugfs, from e2fsprogs).
has() { debugfs -R "stat $1" "$cache/root.img" 2>/dev/null | grep -q "^Inode:"; }
rxe=$(debugfs -R "ls -p /lib/modules" "$cache/root.img" 2>/dev/null | awk -F/ '$6 ~ /^[0-9]/ {print $6; exit}')
[ -n "$rxe" ] || fail "the image has no kernel modules"
for p in /sbin/rocenode-init "/lib/modules/$rxe/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" \
         /usr/bin/rdma /usr/bin/ib_write_bw /usr/bin/ucx_info /usr/bin/mpirun /usr/sbin/sshd \
         /root/.ssh/id_ed25519 /root/.ssh/authorized_keys; do
  has "$p" || fail "the image lacks $p"
done
# Every Debian library the binary links, where this host has it (the
# nodes run the host's build over 9p): a library missing from the recipe
# only shows when a node starts the binary.
# The names the loader looks up (sonames; /lib is /usr/lib in bookworm),
# not the files behind them, whose versions may differ from the host's.
missing=()
while read -r lib; do
  has "$lib" || missing+=("$lib")
done < <(ldd "$SHARDTRAIN" | awk '/=> \// {print $3}' | sed 's|^/lib/|/usr/lib/|' | grep '^/usr/lib/' | sort -u)
[ ${#missing[@]} -eq 0 ] ||
  fail "the image lacks libraries $SHARDTRAIN links (add their packages to launch/rocenodes-image): ${missing[*]}"
pass "the image (kernel $rxe) holds rdma_rxe, the stub init, rdma, ib_write_bw, ucx_info, mpirun, sshd, the nodes' key and every library shardtrain links"
