# The install and the package, as a user of the library meets them:
# `cmake --install` of this build into a scratch prefix; a project of its
# own (tests/install/consumer) found through find_package(shardtrain) alone,
# built and trained on 2 ranks, on the static and the shared library; the
# installed program running the demo's config with the tools it finds next
# to itself; and `cpack -G DEB`, the package installed into a scratch root
# and the demo run from there.
source "$(dirname "$0")/lib.sh"
build=$(cd "$(dirname "$SHARDTRAIN")/.." && pwd)
prefix="$WORK/prefix"
data=$(prep_fmnist)
short=("data.train=\"$data/train\"" "data.test=\"$data/test\"" train.max_steps=40 target.value=0.99)

cmake --install "$build" --prefix "$prefix" >install.txt
for f in bin/shardtrain bin/shardrun bin/shardtrain_report.py lib/cmake/shardtrain/shardtrainConfig.cmake lib/libshardtrain.so \
         lib/cmake/shardtrain/shardtrainConfigVersion.cmake include/shardtrain/runtime/train/trainer.h \
         include/shardtrain/runtime/comm/communicator.h include/shardtrain/train.h include/shardtrain/model.h \
         include/shardtrain/comm.h lib/shardtrain/libshardtrain_train.a \
         share/shardtrain/examples/fmnist_mlp.toml share/doc/shardtrain/config.md; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
pass "installed $(grep -c Installing install.txt) files under $prefix"

# A project that knows only the install.
cmake -S "$SOURCE_DIR/tests/install/consumer" -B consumer -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >consumer-configure.txt || { cat consumer-configure.txt; fail "find_package(shardtrain) failed"; }
cmake --build consumer >consumer-build.txt || { cat consumer-build.txt; fail "the consumer did not build"; }
set_args=()
for kv in "${short[@]}"; do set_args+=("$kv"); done
"$SOURCE_DIR/launch/shardrun" -n 2 -- consumer/train_from_library "$SOURCE_DIR/examples/fmnist_mlp.toml" lib-run \
  "${set_args[@]}" >consumer-run.txt || { cat consumer-run.txt; fail "the consumer's training failed"; }
[ "$(json_get lib-run/result.json 'j["world_size"]')" = 2 ] || fail "the consumer's run was not on 2 ranks"
[ "$(json_get lib-run/result.json 'j["steps"]')" = 40 ] || fail "the consumer's run did not take 40 steps"
pass "a project built against the install trained on 2 ranks: $(grep '^\[done\]' consumer-run.txt)"
readelf -d consumer/train_from_shared_library >shared-needed.txt
grep -q 'NEEDED.*libshardtrain\.so' shared-needed.txt || fail "train_from_shared_library does not load libshardtrain.so"
"$SOURCE_DIR/launch/shardrun" -n 2 -- consumer/train_from_shared_library "$SOURCE_DIR/examples/fmnist_mlp.toml" \
  shared-run "${set_args[@]}" >shared-run.txt || { cat shared-run.txt; fail "the consumer on the shared library failed"; }
[ "$(json_get shared-run/result.json 'j["final"]')" = "$(json_get lib-run/result.json 'j["final"]')" ] ||
  fail "the shared library's run ended otherwise than the static one's"
pass "the same program on libshardtrain.so: the same final evaluation"

# A model the library does not ship (examples/custom_model): its layer's
# gradients checked with the library's helper, then trained on 2 ranks with
# DDP for half an epoch and a checkpoint, continued with FSDP from that
# checkpoint to the end of the epoch and a stated accuracy (the full run to
# 88%: docs/BENCHMARKS.md).
cmake -S "$SOURCE_DIR/examples/custom_model" -B resmlp -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  >resmlp-configure.txt || { cat resmlp-configure.txt; fail "examples/custom_model did not configure"; }
cmake --build resmlp >resmlp-build.txt || { cat resmlp-build.txt; fail "examples/custom_model did not build"; }
resmlp/resmlp_train --check-gradients >resmlp-check.txt || { cat resmlp-check.txt; fail "the residual unit's gradients"; }
grep -q "gradient check passed" resmlp-check.txt || fail "no gradient check ran: $(cat resmlp-check.txt)"
resmlp_cfg="$SOURCE_DIR/examples/custom_model/resmlp_fmnist.toml"
resmlp_data=(--set "data.train=\"$data/train\"" --set "data.test=\"$data/test\"" --set train.epochs=1)
resmlp/resmlp_train "$resmlp_cfg" "${resmlp_data[@]}" --plan 2 >resmlp-plan.txt || { cat resmlp-plan.txt; fail "no plan"; }
grep -q "^memory plan: .*(residual_mlp, 992266 parameters), 2 ranks" resmlp-plan.txt || { cat resmlp-plan.txt; fail "the plan"; }
"$SOURCE_DIR/launch/shardrun" -n 2 -- resmlp/resmlp_train "$resmlp_cfg" "${resmlp_data[@]}" --set train.max_steps=234 \
  --set checkpoint.every_steps=234 --run-dir resmlp-ddp >resmlp-ddp.txt || { cat resmlp-ddp.txt; fail "DDP training of the custom model failed"; }
grep -q '^\[init\] model residual_mlp (5 blocks)' resmlp-ddp.txt || { cat resmlp-ddp.txt; fail "the custom model was not built"; }
ckpt=$(ls resmlp-ddp/checkpoints/*.h5)
"$SOURCE_DIR/launch/shardrun" -n 2 -- resmlp/resmlp_train "$resmlp_cfg" "${resmlp_data[@]}" --set parallel.strategy=fsdp \
  --set target.value=0.84 --run-dir resmlp-fsdp --resume "$ckpt" >resmlp-fsdp.txt || { cat resmlp-fsdp.txt; fail "FSDP training of the custom model failed"; }
grep -q '^\[resume\] .*step 234' resmlp-fsdp.txt || { cat resmlp-fsdp.txt; fail "FSDP did not resume from DDP's checkpoint"; }
[ "$(json_get resmlp-fsdp/result.json 'j["reached_target"]')" = True ] || { cat resmlp-fsdp.txt; fail "the custom model did not reach 84% in one epoch"; }
pass "examples/custom_model: $(cat resmlp-check.txt); DDP to step 234, FSDP from its checkpoint: $(grep -o 'final test_accuracy [0-9.]*%' resmlp-fsdp.txt)"
# The shardtrain program registers no custom model, and says where one comes from.
if "$prefix/bin/shardtrain" train "$resmlp_cfg" "${resmlp_data[@]}" >custom-in-shardtrain.txt 2>&1; then
  fail "shardtrain trained a model it does not have"
fi
grep -q 'no model named "residual_mlp" is registered' custom-in-shardtrain.txt || { cat custom-in-shardtrain.txt; fail "the refusal does not say why"; }

# The installed program, with its own report tool.
sets=()
for kv in "${short[@]}"; do sets+=(--set "$kv"); done
"$prefix/bin/shardrun" -n 2 -- "$prefix/bin/shardtrain" train "$prefix/share/shardtrain/examples/fmnist_mlp.toml" \
  "${sets[@]}" --run-dir installed-run >installed-run.txt || { cat installed-run.txt; fail "the installed program failed"; }
"$prefix/bin/shardtrain" report installed-run >report.txt || { cat report.txt; fail "the installed report failed"; }
pass "the installed shardtrain trained and reported"

# The Debian package: its dependencies resolved by apt against Debian's
# archive (a simulation: nothing is installed on this machine), then
# installed by dpkg into a scratch root of its own, whose program runs the
# demo (the README's: the MLP, DDP on 2 ranks, to 88%).
(cd "$build" && cpack -G DEB -B "$WORK/deb" >"$WORK/cpack.txt") || { cat cpack.txt; fail "cpack -G DEB failed"; }
deb=$(ls "$WORK"/deb/*.deb)
dpkg-deb --info "$deb" >deb-info.txt
grep -q "Depends: .*libhdf5-openmpi-dev" deb-info.txt || fail "the package does not name its dependencies"
dpkg-deb -c "$deb" >deb-contents.txt
grep -q '/usr/lib/libshardtrain\.so\.0\.1' deb-contents.txt || fail "the package has no libshardtrain.so"
apt-get install --simulate "$deb" >deb-apt.txt 2>&1 || { cat deb-apt.txt; fail "apt cannot resolve the package's dependencies"; }
grep -q "^Inst shardtrain " deb-apt.txt || { cat deb-apt.txt; fail "apt would not install the package"; }
mkdir -p root/var/lib/dpkg/info root/var/lib/dpkg/updates && touch root/var/lib/dpkg/status
# --force-depends: the scratch root's dpkg database knows none of the
# dependencies, which apt resolved above and this machine has.
dpkg --root="$WORK/root" --force-depends --force-not-root -i "$deb" >deb-install.txt 2>&1 ||
  { cat deb-install.txt; fail "dpkg could not install the package"; }
grep -q "^ii  shardtrain " <(dpkg --root="$WORK/root" -l shardtrain 2>/dev/null) || fail "dpkg does not list it installed"
"root/usr/bin/shardrun" -n 2 -- "root/usr/bin/shardtrain" train "root/usr/share/shardtrain/examples/fmnist_mlp.toml" \
  --set "data.train=\"$data/train\"" --set "data.test=\"$data/test\"" --run-dir deb-run >deb-run.txt ||
  { cat deb-run.txt; fail "the installed package's demo failed"; }
[ "$(json_get deb-run/result.json 'j["reached_target"]')" = True ] || { cat deb-run.txt; fail "the demo did not reach 88%"; }
pass "$(basename "$deb") ($(du -h "$deb" | cut -f1)) installed into a scratch root; its demo: $(grep -o 'target test_accuracy >= 88.00% reached in [0-9.]* s' deb-run.txt)"
