# shellcheck shell=bash
# Sourced by scripts/gpu-check.sh (section f): training on the GPU against the
# CPU. Kept apart so that the device key and CLI can be fixed here alone once
# they are final. Uses gpu-check.sh's helpers: run NAME SECONDS CMD...,
# say, show, body, json_get FILE EXPR, check_row, train_row, $W, $REPO,
# $ST_BUNDLE (the unpacked bundle, from env.sh).
#
#   GPU_TRAIN_STEPS      K, optimizer steps per run (default 50)
#   GPU_TRAIN_DEVICE_KEY the config key of the device (default runtime.device;
#                        values "cpu" and "cuda")
#   GPU_TRAIN_MODELS     which of mlp cnn gpt llama (default all four)
#   GPU_TRAIN_LOSS_LIMIT rel. difference of loss@K allowed, CPU vs GPU (default 2e-2)
#   GPU_BENCH_BATCH      global batch of the extra MLP throughput run (default 8192)
# Per model it also runs the same K steps in PyTorch on the GPU
# (bench/torch_reference.py; row torch-cuda) when $PY imports torch.
source "$REPO/scripts/strategy-flags.sh"

GPU_TRAIN_STEPS=${GPU_TRAIN_STEPS:-50}
GPU_TRAIN_DEVICE_KEY=${GPU_TRAIN_DEVICE_KEY:-runtime.device}
GPU_TRAIN_MODELS=${GPU_TRAIN_MODELS:-mlp cnn gpt llama}
GPU_TRAIN_LOSS_LIMIT=${GPU_TRAIN_LOSS_LIMIT:-2e-2}
GPU_BENCH_BATCH=${GPU_BENCH_BATCH:-8192}

# The data: the bundle's (Fashion-MNIST's test split doubles as training data,
# KJV as prepared), else the repo's data/, else synthetic 28x28 images.
gpu_train_data() {  # MODEL -> "TRAIN TEST" or nothing
  local b=${ST_BUNDLE:-/tmp/stb}
  case $1 in
    mlp|cnn)
      for d in "$b/data/fashion-mnist" "$REPO/data/fashion-mnist"; do
        [ -f "$d/test/part-00000.h5" ] && { echo "$d/test $d/test"; return; }
      done
      if [ ! -f "$W/synthetic/train/part-00000.h5" ]; then
        run prep-synthetic 60 shardtrain prep synthetic --out "$W/synthetic/train" --samples 10000 --sample-bytes 784 --classes 10 >/dev/null
      fi
      [ -f "$W/synthetic/train/part-00000.h5" ] && echo "$W/synthetic/train $W/synthetic/train" ;;
    gpt|llama)
      for d in "$b/data/kjv" "$REPO/data/kjv"; do
        [ -f "$d/train/part-00000.h5" ] && { echo "$d/train $d/test"; return; }
      done ;;
  esac
}

gpu_train_config() {  # MODEL -> config file
  case $1 in mlp) echo "$REPO/examples/fmnist_mlp.toml" ;; cnn) echo "$REPO/examples/fmnist_cnn.toml" ;; gpt) echo "$REPO/examples/gpt_kjv.toml" ;; llama) echo "$REPO/examples/llama_kjv.toml" ;; esac
}

# run_figures RUN_DIR LOG K: "loss@K test_loss step_ms samples/s" of a
# `shardtrain train` run, "-" for what is missing. loss@K is the progress
# line of step K (the loss of that batch).
run_figures() {
  local loss; loss=$(grep -oE "step $3/[0-9]+ +loss [0-9.eE+-]+" "$2" | tail -1 | awk '{print $NF}')
  echo "${loss:--}" \
    "$(json_get "$1/result.json" '"%.4f" % j["final"]["test_loss"]')" \
    "$(json_get "$1/result.json" '"%.2f" % (1000*j["per_rank"][0]["step_time_median_s"])')" \
    "$(json_get "$1/result.json" '"%.0f" % j["samples_per_s"]')"
}

# compare_row CHECK A B: a `train` check row with |A - B| / |A| (|A - B|
# when A is 0) against GPU_TRAIN_LOSS_LIMIT; FAIL(missing run) without both.
compare_row() {
  local a=$2 b=$3
  if [ -z "$a" ] || [ -z "$b" ] || [ "$a" = - ] || [ "$b" = - ]; then
    check_row train "$1" - - "$GPU_TRAIN_LOSS_LIMIT" "FAIL(missing run)"; return
  fi
  local rel ok
  rel=$(awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.3e", (a == 0 ? d : d / (a < 0 ? -a : a)) }')
  ok=$(awk -v r="$rel" -v l="$GPU_TRAIN_LOSS_LIMIT" 'BEGIN { print (r < l) ? "PASS" : "FAIL" }')
  check_row train "$1" - "$rel" "$GPU_TRAIN_LOSS_LIMIT" "$ok"
}

gpu_training_checks() {
  local K=$GPU_TRAIN_STEPS key=$GPU_TRAIN_DEVICE_KEY
  mkdir -p "$W/runs"
  local probe_cfg; probe_cfg=$(gpu_train_config mlp)
  local has_key=0
  if run probe-device-key 30 shardtrain config "$probe_cfg" --set "$key=cuda"; then has_key=1; fi
  if [ $has_key = 1 ]; then
    say "config key $key: accepted"
  else
    say "config key $key: not accepted by this build ($(body "$W/logs/probe-device-key.log" | grep -m1 -i error)); CPU runs only"
    check_row train "config key $key" - - - "SKIP(unknown key)"
  fi

  local m
  for m in $GPU_TRAIN_MODELS; do
    local cfg data tr te
    cfg=$(gpu_train_config "$m"); data=$(gpu_train_data "$m")
    if [ -z "$data" ]; then say "$m: no data"; train_row "$m" - "$K" - - - - - "SKIP(no data)"; continue; fi
    read -r tr te <<<"$data"
    local common=(--set "data.train=$tr" --set "data.test=$te" --set data.test_limit=1000
                  --set "train.max_steps=$K" --set train.progress_every_s=0)
    local loss_cpu="" loss_gpu="" dev
    for dev in cpu cuda; do
      if [ $has_key = 0 ] && [ $dev = cuda ]; then train_row "$m" cuda "$K" - - - - - "SKIP(no $key)"; continue; fi
      local devset=(); [ $has_key = 1 ] && devset=(--set "$key=$dev")
      local rd=$W/runs/$m-$dev
      run "train-$m-$dev" 90 shardtrain train "$cfg" "${common[@]}" "${devset[@]}" --run-dir "$rd" --overwrite
      local rc=$? f=$W/logs/train-$m-$dev.log loss tl ms sps
      read -r loss tl ms sps < <(run_figures "$rd" "$f" "$K")
      say "$m $dev: exit $rc, loss@$K $loss, test_loss $tl, step ${ms} ms, ${sps} samples/s"
      [ $rc -eq 0 ] || body "$f" | grep -v '^\[train\]' | tail -8 | sed 's/^/  ! /'
      train_row "$m" "$dev" "$K" "$loss" "$tl" "$ms" "$sps" - "$(rc_word $rc)"
      [ $dev = cpu ] && loss_cpu=$loss || loss_gpu=$loss
    done
    [ $has_key = 1 ] && compare_row "$m loss@$K cpu vs cuda" "$loss_cpu" "$loss_gpu"

    # DDP and FSDP on 2 ranks sharing the GPU: collectives over MPI with
    # device buffers (NCCL refuses two ranks on one GPU); the test loss must
    # track the 1-rank run. FSDP on a GPU is refused by the config until it
    # has been checked on one: SHARDTRAIN_UNVERIFIED_GPU_FSDP=1 lets this run it.
    if [ $has_key = 1 ] && { [ "$m" = mlp ] || [ "$m" = gpt ]; }; then
      [ "$m" = mlp ] && gpu_two_ranks "$m" ddp "$K" "${common[@]}" --set "$key=cuda"
      gpu_two_ranks "$m" fsdp "$K" "${common[@]}" --set "$key=cuda"
    fi

    # Throughput: `bench step` times the training step against its GEMMs alone.
    local benches=("cpu:") ; [ $has_key = 1 ] && benches+=("cuda:")
    [ $has_key = 1 ] && [ "$m" = mlp ] && benches+=("cuda:$GPU_BENCH_BATCH")
    local bspec
    for bspec in "${benches[@]}"; do
      local dev=${bspec%%:*} batch=${bspec#*:}
      local extra=(); [ $has_key = 1 ] && extra=(--set "$key=$dev")
      [ -n "$batch" ] && extra+=(--set "train.global_batch_size=$batch")
      local steps=20 rounds=3; [ $dev = cpu ] && { steps=5; rounds=1; }
      local name=bench-$m-$dev${batch:+-b$batch} js=$W/runs/bench-$m-$dev${batch:+-b$batch}.json
      run "$name" 90 shardtrain bench step "$cfg" --set "data.train=$tr" --set "data.test=$te" "${extra[@]}" \
        --steps $steps --rounds $rounds --warmup 2 --json "$js"
      local rc=$?
      local ms tf gb sps
      ms=$(json_get "$js" '"%.2f" % (1000*j["step_time_s"])')
      tf=$(json_get "$js" '"%.3f" % (j["step_gflops"]/1000)')
      # bench step counts GEMM FLOPs on the CPU only; the GPU's TFLOP/s come
      # from gpu_train_gpu_step_test (GPUTRAIN lines).
      [ $dev = cuda ] && tf=-
      gb=$(json_get "$js" 'j["global_batch_size"]')
      sps=$(json_get "$js" '"%.0f" % (j["global_batch_size"]/j["step_time_s"])')
      say "bench $m $dev batch ${gb}: exit $rc, step $ms ms, $tf TFLOP/s"
      [ $rc -eq 0 ] || body "$W/logs/$name.log" | tail -5 | sed 's/^/  ! /'
      train_row "$m" "$dev-bench" "b=$gb" - - "$ms" "$sps" "$tf" "$(rc_word $rc)"
    done

    # PyTorch on the same GPU with the same job (bench/torch_reference.py):
    # what people use today, against this run's cuda row.
    [ $has_key = 1 ] && gpu_torch_reference "$m" "$cfg" "$K" "${common[@]}"
  done
}

# gpu_two_ranks MODEL STRATEGY K SETTINGS...: K steps on 2 ranks sharing the
# GPU (comm.backend = mpi), a row `cuda-<strategy>2`, and the test loss
# against the model's 1-rank cuda run (the progress line's loss is rank 0's
# half of the batch, so the runs are compared by their test loss: same global
# batches, same model).
gpu_two_ranks() {
  local m=$1 strategy=$2 K=$3; shift 3
  local cfg; cfg=$(gpu_train_config "$m")
  local rd2=$W/runs/$m-cuda-${strategy}2 name=train-$m-cuda-${strategy}2
  local f2=$W/logs/$name.log
  SHARDTRAIN_UNVERIFIED_GPU_FSDP=1 run "$name" 90 mpirun -x SHARDTRAIN_UNVERIFIED_GPU_FSDP -n 2 \
    shardtrain train "$cfg" "$@" $(strategy_flags "$cfg" "$strategy") --set comm.backend=mpi \
    --run-dir "$rd2" --overwrite
  local rc2=$? loss2 tl2 ms2 sps2
  read -r loss2 tl2 ms2 sps2 < <(run_figures "$rd2" "$f2" "$K")
  say "$m cuda $strategy x2 (device MPI): exit $rc2, loss@$K $loss2, test_loss $tl2"
  [ $rc2 -eq 0 ] || body "$f2" | grep -v '^\[train\]' | tail -8 | sed 's/^/  ! /'
  train_row "$m" "cuda-${strategy}2" "$K" "$loss2" "$tl2" "$ms2" "$sps2" - "$(rc_word $rc2)"
  local test_loss='"%.6f" % j["final"]["test_loss"]'
  compare_row "$m test_loss cuda 1 vs 2 ranks ($strategy)" "$(json_get "$W/runs/$m-cuda/result.json" "$test_loss")" \
    "$(json_get "$rd2/result.json" "$test_loss")"
}

# gpu_torch_reference MODEL CONFIG K SETTINGS...: K steps of the config in
# PyTorch on cuda:0 (tf32 matmuls, as runtime.gpu_gemm's default), a row
# `torch-cuda` and the step-time ratio against shardtrain's cuda run.
gpu_torch_reference() {
  local m=$1 cfg=$2 K=$3; shift 3
  if [ "$m" = llama ]; then  # bench/torch_reference.py has no Llama
    train_row "$m" torch-cuda "$K" - - - - - "SKIP(no torch Llama)"; return
  fi
  if [ -z "$PY" ] || ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
    train_row "$m" torch-cuda "$K" - - - - - "SKIP(no torch)"; return
  fi
  local toml=$W/runs/torch-$m.toml js=$W/runs/torch-$m-cuda.json
  shardtrain config "$cfg" "$@" --set target.value=0 > "$toml" 2>> "$LOG" || { train_row "$m" torch-cuda "$K" - - - - - "FAIL(config)"; return; }
  run "torch-$m-cuda" 120 "$PY" "$REPO/bench/torch_reference.py" "$toml" --device cuda --json "$js"
  local rc=$? tl ms sps ours
  tl=$(json_get "$js" '"%.4f" % j["final"]["test_loss"]')
  ms=$(json_get "$js" '"%.2f" % j["step_ms_median"]')
  sps=$(json_get "$js" '"%.0f" % (j["samples_per_s"])')
  ours=$(json_get "$W/runs/$m-cuda/result.json" '"%.2f" % (1000*j["per_rank"][0]["step_time_median_s"])')
  local ratio; ratio=$(awk -v a="$ms" -v b="$ours" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
  say "$m torch cuda: exit $rc, test_loss $tl, step ${ms} ms (shardtrain ${ours} ms: PyTorch/shardtrain ${ratio})"
  [ $rc -eq 0 ] || body "$W/logs/torch-$m-cuda.log" | tail -5 | sed 's/^/  ! /'
  train_row "$m" torch-cuda "$K" - "$tl" "$ms" "$sps" - "$(rc_word $rc)"
}
