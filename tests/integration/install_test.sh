# The install and the package, as a user of the library meets them:
# `cmake --install` of this build into a scratch prefix; a project of its
# own (tests/install/consumer) found through find_package(shardtrain) alone,
# built and trained on 2 ranks; the installed program running the demo's
# config with the tools it finds next to itself; and `cpack -G DEB`, the
# package unpacked into a scratch root and its program run from there.
source "$(dirname "$0")/lib.sh"
build=$(cd "$(dirname "$SHARDTRAIN")/.." && pwd)
prefix="$WORK/prefix"
data=$(prep_fmnist)
short=("data.train=\"$data/train\"" "data.test=\"$data/test\"" train.max_steps=40 target.value=0.99)

cmake --install "$build" --prefix "$prefix" >install.txt
for f in bin/shardtrain bin/shardrun bin/shardtrain_report.py lib/cmake/shardtrain/shardtrainConfig.cmake \
         lib/cmake/shardtrain/shardtrainConfigVersion.cmake include/shardtrain/runtime/train/trainer.h \
         include/shardtrain/runtime/comm/communicator.h lib/shardtrain/libshardtrain_train.a \
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

# The installed program, with its own report tool.
sets=()
for kv in "${short[@]}"; do sets+=(--set "$kv"); done
"$prefix/bin/shardrun" -n 2 -- "$prefix/bin/shardtrain" train "$prefix/share/shardtrain/examples/fmnist_mlp.toml" \
  "${sets[@]}" --run-dir installed-run >installed-run.txt || { cat installed-run.txt; fail "the installed program failed"; }
"$prefix/bin/shardtrain" report installed-run >report.txt || { cat report.txt; fail "the installed report failed"; }
pass "the installed shardtrain trained and reported"

# The Debian package, unpacked into a scratch root.
(cd "$build" && cpack -G DEB -B "$WORK/deb" >"$WORK/cpack.txt") || { cat cpack.txt; fail "cpack -G DEB failed"; }
deb=$(ls deb/*.deb)
dpkg-deb --info "$deb" >deb-info.txt
grep -q "Depends: .*libhdf5-openmpi-dev" deb-info.txt || fail "the package does not name its dependencies"
dpkg-deb -x "$deb" root
"root/usr/bin/shardtrain" train "root/usr/share/shardtrain/examples/fmnist_mlp.toml" "${sets[@]}" \
  --run-dir deb-run >deb-run.txt || { cat deb-run.txt; fail "the packaged program failed"; }
[ "$(json_get deb-run/result.json 'j["steps"]')" = 40 ] || fail "the packaged program did not take 40 steps"
pass "$(basename "$deb") ($(du -h "$deb" | cut -f1)) unpacked and trained"
