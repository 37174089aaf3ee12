# shellcheck shell=bash
# Sourced by scripts/gpu-check.sh (sections n and z): what one GPU can show
# of the parallel strategies and of the kernels' correctness.
#   n. every strategy on one rank over NCCL (none, ddp with bucket batches 1
#      and all, zero1, fsdp full, grad_op, hybrid) x accumulation 1 and 2,
#      in f32: the final test loss bit for bit that of `none` (a one-rank
#      NCCL reduction changes no bit), also with debug.slow_comm_ms; DDP's
#      bf16 gradients and FSDP's bf16 parameters and reductions within a
#      tolerance; the same run three times and once under
#      CUDA_LAUNCH_BLOCKING=1, bit for bit (a difference is a race); none
#      with and without CUDA graphs bit for bit (at accumulation 2 DDP's
#      and ZeRO-1's first micro-batch replays too, against none's bits), at f32 and at bf16, and
#      bf16 with cuDNN's and the materialized attention within the bf16
#      tolerance; mixed precision with and without graphs bit for bit, and
#      within the bf16 tolerance of bf16 GEMMs on f32 activations.
#   z. compute-sanitizer (memcheck, racecheck, synccheck) on the kernel
#      tests and on one training step.
# The model: examples/gpt_kjv.toml (2 Blocks, 128 wide) on synthetic tokens
# (vocabulary 256, T 64), GPU_STRATEGY_STEPS steps (default 8).
#   GPU_STRATEGY_DEVICE=cpu GPU_STRATEGY_BACKEND=mpi: the same matrix on the
#   CPU (one rank), to try the section without a GPU.
# Uses gpu-check.sh's run, say, body, json_get, check_row, rc_word, $W, $UNPACK.
source "$REPO/scripts/strategy-flags.sh"

GPU_STRATEGY_STEPS=${GPU_STRATEGY_STEPS:-8}
GPU_STRATEGY_BF16_LIMIT=${GPU_STRATEGY_BF16_LIMIT:-2e-2}
# cpu and mpi run the same matrix here, without a GPU (one rank on MPI).
GPU_STRATEGY_DEVICE=${GPU_STRATEGY_DEVICE:-cuda}
GPU_STRATEGY_BACKEND=${GPU_STRATEGY_BACKEND:-nccl}

strategy_data() {
  local d=$W/strategy-data
  [ -f "$d/train/manifest.json" ] ||
    run prep-tokens-strategies 60 shardtrain prep tokens --out "$d" --vocab 256 --block-size 64 --samples 1024 \
      --test-samples 64 >/dev/null || return 1
  echo "$d"
}

# strategy_run NAME DATA SETTINGS...: one run; prints its final test loss as
# Python's repr of the double (every bit), or "-".
strategy_run() {
  local name=$1 data=$2; shift 2
  local cfg=$REPO/examples/gpt_kjv.toml rd=$W/runs/strategy-$name
  SHARDTRAIN_UNVERIFIED_GPU_FSDP=1 run "strategy-$name" 90 shardtrain train "$cfg" \
    --set "data.train=$data/train" --set "data.test=$data/test" --set "train.max_steps=$GPU_STRATEGY_STEPS" \
    --set schedule.warmup_steps=2 --set target.value=0 --set train.progress_every_s=0 --set "runtime.device=$GPU_STRATEGY_DEVICE" \
    "$@" --run-dir "$rd" --overwrite >/dev/null
  json_get "$rd/result.json" 'repr(j["final"]["test_loss"])'
}

# same_bits CHECK WANT GOT: a row, PASS when the two reprs are equal.
same_bits() {
  local res=FAIL
  [ "$2" != - ] && [ "$2" = "$3" ] && res=PASS
  [ "$3" = - ] && res="FAIL(run failed)"
  check_row strategy "$1" f32 "$([ "$res" = PASS ] && echo 0 || echo "$3 vs $2")" 0 "$res"
  say "$1: $3 (want $2): $res"
}

# close CHECK WANT GOT: a row, PASS within GPU_STRATEGY_BF16_LIMIT (relative).
close() {
  local rel res
  rel=$(awk -v a="$2" -v b="$3" 'BEGIN { if (a == "-" || b == "-") print "-"; else { d = a - b; if (d < 0) d = -d; printf "%.3e", d / (a < 0 ? -a : a) } }')
  res=$(awk -v r="$rel" -v l="$GPU_STRATEGY_BF16_LIMIT" 'BEGIN { print (r != "-" && r < l) ? "PASS" : "FAIL" }')
  check_row strategy "$1" bf16 "$rel" "$GPU_STRATEGY_BF16_LIMIT" "$res"
  say "$1: $3 against $2 (rel. $rel): $res"
}

gpu_strategy_checks() {
  mkdir -p "$W/runs"
  local data; data=$(strategy_data) || { check_row strategy "prep tokens" - - - FAIL; return 1; }
  local cfg=$REPO/examples/gpt_kjv.toml f32=(--set runtime.gpu_gemm=f32 --set "comm.backend=$GPU_STRATEGY_BACKEND")
  local A
  for A in 1 2; do
    local acc=(--set "train.accumulation_steps=$A")
    local want; want=$(strategy_run "none-a$A" "$data" "${f32[@]}" "${acc[@]}" $(strategy_flags "$cfg" none))
    say "none, accumulation $A: final test_loss $want"
    # none replays its micro-batches as CUDA graphs (runtime.cuda_graphs):
    # launched one kernel at a time, the same bits.
    same_bits "none graphs off a$A = none" "$want" \
      "$(strategy_run "none-nographs-a$A" "$data" "${f32[@]}" "${acc[@]}" $(strategy_flags "$cfg" none) \
        --set runtime.cuda_graphs=false)"
    local spec
    for spec in "ddp-b1:ddp:--set parallel.ddp.bucket_batch=1" "ddp-ball:ddp:--set parallel.ddp.bucket_batch=1000" \
                "zero1:zero1:" "fsdp-full:fsdp:--set parallel.fsdp.sharding=full" \
                "fsdp-grad_op:fsdp:--set parallel.fsdp.sharding=grad_op" \
                "fsdp-hybrid:fsdp:--set parallel.fsdp.sharding=hybrid"; do
      local name=${spec%%:*} rest=${spec#*:}; local strategy=${rest%%:*} extra=${rest#*:}
      # shellcheck disable=SC2086
      same_bits "$name a$A = none" "$want" \
        "$(strategy_run "$name-a$A" "$data" "${f32[@]}" "${acc[@]}" $(strategy_flags "$cfg" "$strategy") $extra)"
    done
    if [ "$A" = 1 ]; then
      local slow=(--set debug.slow_rank=0 --set debug.slow_comm_ms=20)
      same_bits "ddp-b1 slow comm = none" "$want" "$(strategy_run ddp-slow "$data" "${f32[@]}" "${acc[@]}" \
        $(strategy_flags "$cfg" ddp) --set parallel.ddp.bucket_batch=1 "${slow[@]}")"
      same_bits "fsdp-full slow comm = none" "$want" "$(strategy_run fsdp-slow "$data" "${f32[@]}" "${acc[@]}" \
        $(strategy_flags "$cfg" fsdp) "${slow[@]}")"
      close "ddp bf16 grads ~ none" "$want" "$(strategy_run ddp-bf16 "$data" "${f32[@]}" "${acc[@]}" \
        $(strategy_flags "$cfg" ddp) --set parallel.ddp.grad_dtype=bf16)"
      close "fsdp bf16 ~ none" "$want" "$(strategy_run fsdp-bf16 "$data" "${f32[@]}" "${acc[@]}" \
        $(strategy_flags "$cfg" fsdp) --set parallel.fsdp.param_dtype=bf16 --set parallel.fsdp.reduce_dtype=bf16)"
    fi
  done
  # Determinism at the defaults (tf32 GEMMs, cuBLASLt, the sorted embedding
  # backward): three runs and one with every launch synchronous.
  local first; first=$(strategy_run det-1 "$data" $(strategy_flags "$cfg" none))
  same_bits "repeat 2 = repeat 1" "$first" "$(strategy_run det-2 "$data" $(strategy_flags "$cfg" none))"
  same_bits "repeat 3 = repeat 1" "$first" "$(strategy_run det-3 "$data" $(strategy_flags "$cfg" none))"
  same_bits "CUDA_LAUNCH_BLOCKING=1 = repeat 1" "$first" \
    "$(CUDA_LAUNCH_BLOCKING=1 strategy_run det-blocking "$data" $(strategy_flags "$cfg" none))"
  # bf16 (cuDNN's fused attention, the GELU epilogues, the kept bf16
  # copies): deterministic, the same with and without graphs, and close to
  # the materialized attention.
  local bf16=(--set runtime.gpu_gemm=bf16) b1
  b1=$(strategy_run bf16-1 "$data" "${bf16[@]}" $(strategy_flags "$cfg" none))
  same_bits "bf16 repeat 2 = repeat 1" "$b1" "$(strategy_run bf16-2 "$data" "${bf16[@]}" $(strategy_flags "$cfg" none))"
  same_bits "bf16 graphs off = graphs on" "$b1" "$(strategy_run bf16-nographs "$data" "${bf16[@]}" \
    $(strategy_flags "$cfg" none) --set runtime.cuda_graphs=false)"
  close "bf16 materialized attention ~ cudnn" "$b1" "$(strategy_run bf16-materialized "$data" "${bf16[@]}" \
    $(strategy_flags "$cfg" none) --set runtime.gpu_attention=materialized)"
  # Mixed precision (bf16 activations and logits, the staging slots where
  # a kernel has no bf16 form): the same with and without graphs, and
  # close to bf16 GEMMs on f32 activations.
  local mixed=(--set runtime.precision=bf16) m1
  m1=$(strategy_run mixed-1 "$data" "${mixed[@]}" $(strategy_flags "$cfg" none))
  same_bits "mixed graphs off = graphs on" "$m1" "$(strategy_run mixed-nographs "$data" "${mixed[@]}" \
    $(strategy_flags "$cfg" none) --set runtime.cuda_graphs=false)"
  close "mixed ~ bf16" "$b1" "$m1"
}

# z. compute-sanitizer: a row per tool on the kernel tests (the 2^31 test
# left out: minutes under the tools) and memcheck on one training step.
gpu_sanitizer_checks() {
  local cs; cs=$(command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; })
  if [ -z "$cs" ]; then check_row sanitizer compute-sanitizer - - - "SKIP(not found)"; return; fi
  local t=$UNPACK/tests/gpu_kernels_cuda_pointwise_test tool
  local filter='--gtest_filter=CudaLayerNorm*:CudaEmbedding*:CudaCrossEntropy*:CudaElementwise*-*Past2To31*'
  for tool in memcheck racecheck synccheck; do
    run "sanitizer-$tool" 120 "$cs" --tool "$tool" --error-exitcode 99 "$t" --gtest_color=no "$filter"
    local rc=$?
    check_row sanitizer "$tool pointwise kernels" - - - "$(rc_word $rc)"
    say "compute-sanitizer $tool (pointwise kernel tests): $(rc_word $rc); $(grep -m1 -E 'ERROR SUMMARY' "$W/logs/sanitizer-$tool.log")"
  done
  run sanitizer-gemm 120 "$cs" --tool memcheck --error-exitcode 99 "$UNPACK/tests/gpu_kernels_cuda_gemm_test" \
    --gtest_color=no; local rc=$?
  check_row sanitizer "memcheck gemm kernels" - - - "$(rc_word $rc)"
  local data; data=$(strategy_data) || return 1
  run sanitizer-step 180 "$cs" --tool memcheck --error-exitcode 99 shardtrain train "$REPO/examples/gpt_kjv.toml" \
    --set "data.train=$data/train" --set "data.test=$data/test" --set data.test_limit=8 --set train.max_steps=1 \
    --set target.value=0 --set runtime.device=cuda --set parallel.strategy=none --run-dir "$W/runs/sanitizer-step" \
    --overwrite
  rc=$?
  check_row sanitizer "memcheck one training step" - - - "$(rc_word $rc)"
  say "compute-sanitizer memcheck, one training step: $(rc_word $rc); $(grep -m1 -E 'ERROR SUMMARY' "$W/logs/sanitizer-step.log")"
}
