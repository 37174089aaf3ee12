#!/usr/bin/env bash
# shardtrain against PyTorch on the same jobs, side by side in one run
# (docs/BENCHMARKS.md, "Against PyTorch"): the reference MLP, CNN and GPT
# configs and the small Llama (BENCH_TORCH_MODELS, default "mlp cnn gpt
# llama"), trained by `shardtrain train` and by bench/torch_reference.py
# (the same model, optimizer, schedule, batch, data and evaluations in
# PyTorch), one thread per process on the CPU.
#   1. Step time on 1 rank: K steps each, the two frameworks alternating,
#      ROUNDS rounds; the median of each framework's rounds. shardtrain runs
#      as configured (runtime.cpu_backend = auto) and with every product on
#      OpenBLAS (runtime.cpu_backend = openblas), in the same rounds. On a
#      CPU with AVX-512, shardtrain also runs with OPENBLAS_CORETYPE=SkylakeX
#      set in its command (OpenBLAS's AVX-512 kernels), in the same rounds.
#   3. (BENCH_TORCH_PARTS="3", run before 2) Time to target on 1 rank, each
#      config as written, once each.
#   2. Time to target with DDP on 2 ranks (shardrun / torchrun, gloo): each
#      config as written (MLP 88%, CNN 90.5%, GPT test loss 1.65 in 800
#      steps), once each.
# BENCH_TORCH_PRECISION=bf16: shardtrain with runtime.precision = "bf16"
# and PyTorch under bf16 autocast (--amp bf16), in every part; part 1 then
# runs shardtrain as configured only (the OpenBLAS columns would be sgemm
# on rounded operands, not bf16 products).
# About 16 minutes on the 2-core VM. Needs torch, numpy and h5py for
# TORCH_PYTHON (default: python3 that imports torch), e.g.
#   python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch numpy h5py
#   TORCH_PYTHON=/tmp/torchenv/bin/python3 scripts/bench-torch.sh [OUT_DIR]
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them
# (they change shardtrain's GEMMs, not PyTorch's, which brings its own);
# where OPENBLAS_CORETYPE is unset and OpenBLAS falls back to a core without
# AVX2, shardtrain restarts itself with a better one (runtime/train/blas_core.h).
source "$(dirname "$0")/bench-common.sh"
K=${BENCH_TORCH_STEPS:-100}
ROUNDS=${BENCH_TORCH_ROUNDS:-3}
MODELS=${BENCH_TORCH_MODELS:-mlp cnn gpt llama}
PARTS=${BENCH_TORCH_PARTS:-1 2}
PRECISION=${BENCH_TORCH_PRECISION:-f32}
case $PRECISION in
  f32) prec=() amp=() ;;
  bf16) prec=(--set runtime.precision=bf16) amp=(--amp bf16) ;;
  *) echo "bench-torch: BENCH_TORCH_PRECISION=$PRECISION: f32 or bf16" >&2; exit 2 ;;
esac
skx=0; grep -qw avx512f /proc/cpuinfo && skx=1
blas=1; [ "$PRECISION" = f32 ] || { blas=0; skx=0; }
py=${TORCH_PYTHON:-python3}
"$py" -c 'import torch, h5py, numpy' || { echo "bench-torch: $py cannot import torch, h5py and numpy (see the header)" >&2; exit 1; }
torchrun=("$py" -m torch.distributed.run --standalone)
[ -f data/kjv/train/part-00000.h5 ] || $st prep text --out data/kjv --block-size 64

config_of() {
  case $1 in
    mlp) echo examples/fmnist_mlp.toml ;; cnn) echo examples/fmnist_cnn.toml ;;
    gpt) echo examples/gpt_kjv.toml ;; llama) echo examples/llama_kjv.toml ;;
  esac
}
echo "openblas: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}; $("$py" -c 'import torch; print("torch", torch.__version__)')"

# 1. Step time, 1 rank, K steps, target off so that the runs are equal.
for m in $MODELS; do
  [[ " $PARTS " == *" 1 "* ]] || break
  cfg=$(config_of "$m")
  one=($(strategy_flags "$cfg" none))
  $st config "$cfg" --set train.max_steps="$K" --set target.value=0 "${one[@]}" > "$out/torch-$m-steps.toml"
  for r in $(seq "$ROUNDS"); do
    $st train "$cfg" --set train.max_steps="$K" --set target.value=0 "${one[@]}" "${prec[@]}" \
      --run-dir "$out/st-$m-steps-$r" --overwrite > /dev/null
    [ $blas = 0 ] || $st train "$cfg" --set train.max_steps="$K" --set target.value=0 \
      --set runtime.cpu_backend=openblas "${one[@]}" --run-dir "$out/st-blas-$m-steps-$r" --overwrite > /dev/null
    [ $skx = 0 ] || OPENBLAS_CORETYPE=SkylakeX $st train "$cfg" --set train.max_steps="$K" --set target.value=0 \
      "${one[@]}" --run-dir "$out/st-skx-$m-steps-$r" --overwrite > /dev/null
    OMP_NUM_THREADS=1 "$py" bench/torch_reference.py "$out/torch-$m-steps.toml" "${amp[@]}" \
      --json "$out/torch-$m-steps-$r.json" > /dev/null
    echo "step time $m round $r done"
  done
done

# 3. Time to target on 1 rank (BENCH_TORCH_PARTS="3"; about 15 minutes more).
for m in $MODELS; do
  [[ " $PARTS " == *" 3 "* ]] || break
  cfg=$(config_of "$m")
  one=($(strategy_flags "$cfg" none))
  $st config "$cfg" "${one[@]}" > "$out/torch-$m-one.toml"
  $st train "$cfg" "${one[@]}" "${prec[@]}" --run-dir "$out/st-$m-one" --overwrite | grep -E '^\[(eval|done)\]'
  OMP_NUM_THREADS=1 "$py" bench/torch_reference.py "$out/torch-$m-one.toml" "${amp[@]}" --json "$out/torch-$m-one.json"
done

# 2. Time to target, DDP on 2 ranks.
for m in $MODELS; do
  [[ " $PARTS " == *" 2 "* ]] || break
  cfg=$(config_of "$m")
  $st config "$cfg" > "$out/torch-$m-ddp2.toml"
  $run -n 2 -- $st train "$cfg" "${prec[@]}" --run-dir "$out/st-$m-ddp2" --overwrite | grep -E '^\[(eval|done)\]'
  OMP_NUM_THREADS=1 "${torchrun[@]}" --nproc_per_node 2 bench/torch_reference.py "$out/torch-$m-ddp2.toml" "${amp[@]}" \
    --json "$out/torch-$m-ddp2.json" 2>&1 | grep -v '^W[0-9]\|^\*\*\*\*'
done

"$py" - "$out" "$ROUNDS" "$MODELS" "$PARTS" "$skx" "$blas" "$PRECISION" <<'PYEOF'
import json, os, statistics, sys
out, rounds, models, parts, skx = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5] == "1"
blas, precision = sys.argv[6] == "1", sys.argv[7]
print(f"precision: {precision} (shardtrain runtime.precision; PyTorch {'bf16 autocast' if precision == 'bf16' else 'f32'})")
def st_result(d): return json.load(open(f"{out}/{d}/result.json"))
def st_ms(prefix, m): return statistics.median(1e3 * st_result(f"{prefix}-{m}-steps-{r}")["timing"]["step_s"] for r in range(1, rounds + 1))
if "1" in parts:
    print("\n1. step time, 1 rank, 1 thread (median of the rounds' mean step times)")
    print("| model | shardtrain ms | PyTorch ms | PyTorch / shardtrain |"
          + (" shardtrain ms, cpu_backend = openblas | PyTorch / that |" if blas else "")
          + (" shardtrain ms, OPENBLAS_CORETYPE=SkylakeX | PyTorch / that |" if skx else "")
          + " test loss shardtrain / PyTorch |")
    print("| --- | --- | --- | --- |" + (" --- | --- |" if blas else "") + (" --- | --- |" if skx else "") + " --- |")
    for m in models:
        tc = [json.load(open(f"{out}/torch-{m}-steps-{r}.json")) for r in range(1, rounds + 1)]
        ours, theirs = st_ms("st", m), statistics.median(r["step_ms_mean"] for r in tc)
        cols = f"| {m} | {ours:.2f} | {theirs:.2f} | {theirs / ours:.2f} |"
        if blas:
            ours_blas = st_ms("st-blas", m)
            cols += f" {ours_blas:.2f} | {theirs / ours_blas:.2f} |"
        if skx:
            ours_skx = st_ms("st-skx", m)
            cols += f" {ours_skx:.2f} | {theirs / ours_skx:.2f} |"
        print(cols + f" {st_result(f'st-{m}-steps-1')['final']['test_loss']:.4f} / {tc[0]['final']['test_loss']:.4f} |")
def to_target(title, suffix):
  print(f"\n{title}")
  print("| model | target | shardtrain: reached, time | PyTorch: reached, time | PyTorch / shardtrain time | step ms shardtrain / PyTorch | final shardtrain / PyTorch |")
  print("| --- | --- | --- | --- | --- | --- | --- |")
  for m in models:
      s = st_result(f"st-{m}-{suffix}")
      t = json.load(open(f"{out}/torch-{m}-{suffix}.json"))
      metric = "test_loss" if m in ("gpt", "llama") else "test_accuracy"
      fmt = (lambda v: f"{100 * v:.2f}%") if metric == "test_accuracy" else (lambda v: f"{v:.4f}")
      st_t, tc_t = s.get("time_to_target_s"), t.get("time_to_target_s")
      ratio = f"{tc_t / st_t:.2f}" if st_t and tc_t else "-"
      print(f"| {m} | {metric} | {'yes' if st_t else 'no'}, {st_t or s['train_time_s']:.1f} s | "
            f"{'yes' if tc_t else 'no'}, {tc_t or t['train_time_s']:.1f} s | {ratio} | "
            f"{1e3 * s['timing']['step_s']:.2f} / {t['step_ms_mean']:.2f} | {fmt(s['final'][metric])} / {fmt(t['final'][metric])} |")
if "2" in parts:
  to_target("2. DDP on 2 ranks, the configs as written", "ddp2")
if "3" in parts:
  to_target("3. 1 rank, the configs as written", "one")
PYEOF
