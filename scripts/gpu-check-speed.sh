# shellcheck shell=bash
# Sourced by scripts/gpu-check.sh (section g): the GPU's speed against the
# chip and against PyTorch on the same device, in the same run.
#   1. the denominator: the bf16 GEMM rate at 8192^3 (bench/gemm_rate.py,
#      PyTorch's torch.mm, which is cuBLAS);
#   2. shardtrain on gpt2_small (examples/gpt2_small.toml: 12 x 768, T 1024,
#      vocabulary 50257, synthetic tokens) and the wide GPT (6 x 512, T 256,
#      vocabulary 256) at runtime.gpu_gemm f32, tf32 and bf16 (CUDA graphs
#      on), bf16 once more with graphs off, and mixed precision
#      (runtime.precision = bf16: bf16 activations too): tokens/s and
#      achieved model TFLOP/s; three more with telemetry.op_timing: bf16
#      with cuDNN's fused attention and with the materialized one, and
#      mixed, whose per-op tables go to the log;
#   3. the same models in PyTorch (bench/torch_reference.py --synthetic):
#      eager and torch.compile, bf16 autocast, fused AdamW, SDPA.
# Model FLOPs per token: 6 x (the linear layers' weights, head included) +
# 12 x layers x T x width (PaLM's attention term, the causal half not
# taken off), the same formula for both frameworks.
# Rows go to $SPEED (model impl precision batch step_ms tokens_s tflops
# pct_of_gemm result). Uses gpu-check.sh's run, say, show, body, json_get,
# check_row, $W, $PY, $LOG.
#
#   GPU_SPEED_STEPS   optimizer steps per shardtrain run (default 12; the
#                     median step is taken, so the first steps' set-up
#                     does not count)
#   GPU_SPEED_MODELS  which of gpt2_small wide (default both)
#   GPU_SPEED_DEVICE  cuda (default), or cpu to try the section here
#   GPU_SPEED_BATCH_gpt2_small, GPU_SPEED_BATCH_wide: windows per step
#                     (default 8 and 32)

GPU_SPEED_STEPS=${GPU_SPEED_STEPS:-12}
GPU_SPEED_MODELS=${GPU_SPEED_MODELS:-gpt2_small wide}
GPU_SPEED_DEVICE=${GPU_SPEED_DEVICE:-cuda}
SPEED=${SPEED:-$W/speed.tsv}

speed_row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$SPEED"; }

# speed_model NAME -> "vocab T layers width heads batch" of the model.
speed_model() {
  case $1 in
    gpt2_small) echo "50257 1024 12 768 12 ${GPU_SPEED_BATCH_gpt2_small:-8}" ;;
    wide) echo "256 256 6 512 8 ${GPU_SPEED_BATCH_wide:-32}" ;;
  esac
}

speed_flops_per_token() {  # V T L C
  awk -v V="$1" -v T="$2" -v L="$3" -v C="$4" 'BEGIN { printf "%.0f", 6 * (12 * L * C * C + C * V) + 12 * L * T * C }'
}

# speed_data NAME V T -> the data directory (made once with prep tokens).
speed_data() {
  local d=$W/speed-data/$1
  if [ ! -f "$d/train/manifest.json" ]; then
    run "prep-tokens-$1" 120 shardtrain prep tokens --out "$d" --vocab "$2" --block-size "$3" --samples 2048 \
      --test-samples 8 >/dev/null || return 1
  fi
  echo "$d"
}

# The GEMM rate that the models' TFLOP/s are divided by.
speed_gemm_rate() {
  GEMM_TFLOPS=-
  if [ -z "$PY" ] || ! "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    check_row speed "bf16 GEMM 8192^3 (torch.mm)" bf16 - - "SKIP(no torch with CUDA)"; return
  fi
  local js=$W/runs/gemm-rate.json
  run gemm-rate 120 "$PY" "$REPO/bench/gemm_rate.py" --size 8192 --dtype bf16 --json "$js"
  local rc=$?
  GEMM_TFLOPS=$(json_get "$js" '"%.1f" % j["tflops"]')
  say "bf16 GEMM 8192^3: $GEMM_TFLOPS TFLOP/s ($(json_get "$js" 'j["device"]'))"
  check_row speed "bf16 GEMM 8192^3 (torch.mm)" bf16 - - "$(rc_word $rc) ${GEMM_TFLOPS} TFLOP/s"
}

# speed_shardtrain MODEL DATA PRECISION [op [ATTENTION [GRAPHS]]]: one run,
# a row; "op" also times every op and copies the table into the log;
# ATTENTION sets runtime.gpu_attention (default cudnn), so that the op tables
# of the fused and the materialized attention stand side by side; GRAPHS
# sets runtime.cuda_graphs (default true; op timing runs without graphs).
# PRECISION is a runtime.gpu_gemm, or "mixed" for runtime.precision = bf16.
speed_shardtrain() {
  local m=$1 data=$2 p=$3 op=${4:-} att=${5:-cudnn} graphs=${6:-true}
  local gemm=$p precision=f32; [ "$p" = mixed ] && gemm=bf16 precision=bf16
  local V T L C H B; read -r V T L C H B <<<"$(speed_model "$m")"
  local tag=$p${op:+-op}; [ "$att" = cudnn ] || tag=$tag-$att; [ "$graphs" = true ] || tag=$tag-nographs
  local rd=$W/runs/speed-$m-$tag name=speed-$m-$tag
  run "$name" 150 shardtrain train "$REPO/examples/gpt2_small.toml" \
    --set "data.train=$data/train" --set "data.test=$data/test" --set data.test_limit=8 \
    --set "model.vocab_size=$V" --set "model.block_size=$T" --set "model.n_layer=$L" --set "model.n_embd=$C" \
    --set "model.n_head=$H" --set "train.global_batch_size=$B" --set train.accumulation_steps=1 \
    --set train.eval_batch_size=8 --set "train.max_steps=$GPU_SPEED_STEPS" --set schedule.warmup_steps=2 \
    --set parallel.strategy=none --set "runtime.device=$GPU_SPEED_DEVICE" --set "runtime.gpu_gemm=$gemm" \
    --set "runtime.precision=$precision" --set "runtime.gpu_attention=$att" --set "runtime.cuda_graphs=$graphs" \
    --set "telemetry.op_timing=$([ -n "$op" ] && echo true || echo false)" --set train.progress_every_s=0 \
    --run-dir "$rd" --overwrite
  local rc=$? f=$W/logs/$name.log
  local ms; ms=$(json_get "$rd/result.json" '"%.2f" % (1000*j["per_rank"][0]["step_time_median_s"])')
  local impl="shardtrain${op:+ (op timing)}"; [ "$att" = cudnn ] || impl="$impl $att attention"
  [ "$graphs" = true ] || impl="$impl, no graphs"
  speed_figures "$m" "$impl" "$p" "$B" "$ms" "$rc"
  grep -m1 -E 'runs materialized|CUDA graphs off' "$f" | sed 's/^/  ! /' | tee -a "$LOG"
  [ $rc -eq 0 ] || body "$f" | grep -v '^\[train\]' | tail -6 | sed 's/^/  ! /'
  [ -n "$op" ] && sed -n '/^\[summary\] op time/,/^\[summary\] [^ ]/p' "$f" | grep -E '^\[summary\] (op time|  )' |
    sed 's/^\[summary\] /  /' | tee -a "$LOG"
}

# speed_figures MODEL IMPL PRECISION BATCH STEP_MS RC: tokens/s, TFLOP/s and
# the share of the GEMM rate; a row and a line.
speed_figures() {
  local m=$1 impl=$2 p=$3 B=$4 ms=$5 rc=$6
  local V T L C H _B; read -r V T L C H _B <<<"$(speed_model "$m")"
  local per_tok; per_tok=$(speed_flops_per_token "$V" "$T" "$L" "$C")
  local tok tf pct
  tok=$(awk -v ms="$ms" -v B="$B" -v T="$T" 'BEGIN { if (ms + 0 > 0) printf "%.0f", B * T / (ms / 1000); else print "-" }')
  tf=$(awk -v t="$tok" -v f="$per_tok" 'BEGIN { if (t + 0 > 0) printf "%.1f", t * f / 1e12; else print "-" }')
  pct=$(awk -v a="$tf" -v g="${GEMM_TFLOPS:--}" 'BEGIN { if (a + 0 > 0 && g + 0 > 0) printf "%.1f%%", 100 * a / g; else print "-" }')
  say "$m $impl $p batch $B: step $ms ms, $tok tokens/s, $tf TFLOP/s ($pct of the GEMM rate)"
  speed_row "$m" "$impl" "$p" "$B" "$ms" "$tok" "$tf" "$pct" "$(rc_word "$rc")"
}

# speed_torch MODEL MODE(eager|compile): the same model and batch in
# PyTorch, bf16 autocast, fused AdamW, SDPA, synthetic tokens.
speed_torch() {
  local m=$1 mode=$2
  local V T L C H B; read -r V T L C H B <<<"$(speed_model "$m")"
  if [ -z "$PY" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
    speed_row "$m" "torch $mode" bf16 "$B" - - - - "SKIP(no torch)"; return
  fi
  local toml=$W/runs/speed-torch-$m.toml js=$W/runs/speed-torch-$m-$mode.json
  shardtrain config "$REPO/examples/gpt2_small.toml" --set "model.vocab_size=$V" --set "model.block_size=$T" \
    --set "model.n_layer=$L" --set "model.n_embd=$C" --set "model.n_head=$H" --set "train.global_batch_size=$B" \
    --set train.accumulation_steps=1 > "$toml" 2>> "$LOG"
  local extra=(); [ "$mode" = compile ] && extra=(--compile)
  run "speed-torch-$m-$mode" 240 "$PY" "$REPO/bench/torch_reference.py" "$toml" --device "$GPU_SPEED_DEVICE" \
    --synthetic --steps "$GPU_SPEED_STEPS" --amp bf16 --fused-adamw "${extra[@]}" --json "$js"
  local rc=$?
  speed_figures "$m" "torch $mode" bf16 "$B" "$(json_get "$js" '"%.2f" % j["step_ms_median"]')" "$rc"
  [ $rc -eq 0 ] || body "$W/logs/speed-torch-$m-$mode.log" | tail -5 | sed 's/^/  ! /'
}

gpu_speed_checks() {
  : > "$SPEED"
  mkdir -p "$W/runs"
  speed_gemm_rate
  local m
  for m in $GPU_SPEED_MODELS; do
    local V T L C H B; read -r V T L C H B <<<"$(speed_model "$m")"
    local data; data=$(speed_data "$m" "$V" "$T") || { speed_row "$m" shardtrain - "$B" - - - - "FAIL(prep tokens)"; continue; }
    local p
    for p in f32 tf32 bf16 mixed; do speed_shardtrain "$m" "$data" "$p"; done
    speed_shardtrain "$m" "$data" bf16 "" cudnn false
    speed_shardtrain "$m" "$data" bf16 op
    speed_shardtrain "$m" "$data" bf16 op materialized
    speed_shardtrain "$m" "$data" mixed op
    speed_torch "$m" eager
    speed_torch "$m" compile
  done
}
