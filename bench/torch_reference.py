#!/usr/bin/env python3
"""The same training job in PyTorch, for a side-by-side comparison.

Trains what a shardtrain config describes (the resolved config that
`shardtrain config FILE` prints) with PyTorch: the same model (MLP, CNN,
GPT or Llama, same layer sizes and initialization rules), optimizer, learning-rate
schedule, global batch, data (the same HDF5 shards, same normalization),
evaluation after every epoch and at the end, and the same target. One
process trains alone; under torchrun (WORLD_SIZE set) it is DDP over gloo
(CPU) or NCCL (GPU), each rank taking its slice of every global batch, as
shardtrain's ranks do. What differs: the batch order (each framework
shuffles with its own generator) and the initial values (same rules, other
random streams).

    shardtrain config examples/fmnist_mlp.toml > /tmp/mlp.toml
    python3 bench/torch_reference.py /tmp/mlp.toml --json out.json
    torchrun --standalone --nproc_per_node 2 bench/torch_reference.py /tmp/mlp.toml

--amp bf16 runs the forward and the loss, in training and evaluation,
under bf16 autocast (PyTorch's mixed precision: bf16 products and
convolutions, f32 weights and optimizer), beside shardtrain's
runtime.precision = "bf16".

With --synthetic (a GPT only) it times --steps steps on random token
windows of the config's vocabulary and context instead, without data or
evaluation, optionally under bf16 autocast (--amp bf16), torch.compile
(--compile) and fused AdamW (--fused-adamw); scripts/gpu-check-speed.sh
compares shardtrain's tokens/s with it.

Prints one JSON object (rank 0) with the shardtrain result.json's names
where they mean the same: time_to_target_s (from the start of training, the
evaluations included), final test_accuracy / test_loss, steps, and the step
time (mean and median of the training steps, evaluation excluded). Needs
torch, numpy and h5py (pip install torch numpy h5py), or the .npz copies of
the shards that scripts/bundle.sh writes (a GPU machine's PyTorch may lack
h5py). Run by scripts/bench-torch.sh, and on a GPU by
scripts/gpu-check-train.sh.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys
import time
import tomllib

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:
    import h5py
except ImportError:  # a GPU machine's PyTorch: the bundle's .npz copies
    h5py = None


def read_shard(f):
    """(x, y, attributes of /x, num_classes) of one shard file, or of its
    part-*.npz copy where h5py is missing (scripts/bundle.sh writes them for
    a GPU machine whose PyTorch has no h5py)."""
    if h5py is not None:
        with h5py.File(f, "r") as h:
            return h["x"][...], h["y"][...], dict(h["x"].attrs), int(h.attrs["num_classes"])
    npz = f[:-3] + ".npz"
    if not os.path.exists(npz):
        sys.exit(f"torch_reference: h5py is not installed and {npz} does not exist")
    z = np.load(npz)
    attrs = {k: float(z[k]) for k in ("normalize_mean", "normalize_std") if k in z}
    return z["x"], z["y"], attrs, int(z["num_classes"])


def load_split(path, limit=0):
    """All shards of a split in file order: (x as stored: uint8, uint16, int32 or float32; y int64; attrs of /x)."""
    files = sorted(glob.glob(os.path.join(path, "part-*.h5")))
    if not files:
        sys.exit(f"torch_reference: no part-*.h5 in {path}")
    xs, ys, attrs, classes = [], [], {}, 0
    for f in files:
        x, y, attrs, classes = read_shard(f)
        xs.append(x)
        ys.append(y.astype(np.int64))
    x, y = np.concatenate(xs), np.concatenate(ys)
    if limit:
        x, y = x[:limit], y[:limit]
    return x, y, attrs, classes


class Mlp(nn.Module):
    def __init__(self, in_features, hidden, classes):
        super().__init__()
        layers, n = [], in_features
        for w in hidden:
            layers += [nn.Linear(n, w), nn.ReLU()]
            n = w
        layers.append(nn.Linear(n, classes))
        self.net = nn.Sequential(nn.Flatten(), *layers)

    def forward(self, x):
        return self.net(x)


class Cnn(nn.Module):
    def __init__(self, shape, channels, k, fc_hidden, classes):
        super().__init__()
        c, h, w = shape
        layers = []
        for oc in channels:
            layers += [nn.Conv2d(c, oc, k, 1, k // 2), nn.ReLU(), nn.MaxPool2d(2, 2)]
            c, h, w = oc, h // 2, w // 2
        layers.append(nn.Flatten())
        n = c * h * w
        for width in fc_hidden:
            layers += [nn.Linear(n, width), nn.ReLU()]
            n = width
        layers.append(nn.Linear(n, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class TransformerBlock(nn.Module):
    """Pre-LayerNorm GPT-2 block: causal attention, then a 4C GELU (tanh) MLP."""

    def __init__(self, C, n_head, n_layer):
        super().__init__()
        self.n_head = n_head
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        for lin, std in ((self.qkv, 0.02), (self.fc, 0.02),
                         (self.proj, 0.02 / math.sqrt(2 * n_layer)), (self.fc_proj, 0.02 / math.sqrt(2 * n_layer))):
            nn.init.normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, positions, C, n_head, n_layer):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, C), nn.Embedding(positions, C)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        self.blocks = nn.ModuleList(TransformerBlock(C, n_head, n_layer) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, vocab, bias=False)  # PyTorch's default init, as shardtrain's Linear

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


class RmsNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x, cos, sin):
    """Rotary positions with rotate-half pairing (kernels/cpu/rope.h)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class LlamaBlock(nn.Module):
    """RMSNorm, causal grouped-query attention with rotary positions, RMSNorm,
    SwiGLU: runtime/nn/llama_block.h, no biases."""

    def __init__(self, C, n_head, n_kv_head, ffn, n_layer, eps):
        super().__init__()
        self.n_head, self.n_kv_head, self.hs, self.ffn = n_head, n_kv_head, C // n_head, ffn
        self.norm1, self.norm2 = RmsNorm(C, eps), RmsNorm(C, eps)
        self.qkv = nn.Linear(C, (n_head + 2 * n_kv_head) * self.hs, bias=False)
        self.o = nn.Linear(C, C, bias=False)
        self.gate_up = nn.Linear(C, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, C, bias=False)
        for lin, std in ((self.qkv, 0.02), (self.gate_up, 0.02),
                         (self.o, 0.02 / math.sqrt(2 * n_layer)), (self.down, 0.02 / math.sqrt(2 * n_layer))):
            nn.init.normal_(lin.weight, 0.0, std)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.n_head * self.hs, self.n_kv_head * self.hs, self.n_kv_head * self.hs], dim=2)
        heads = lambda t, n: t.view(B, T, n, self.hs).transpose(1, 2)
        q, k, v = heads(q, self.n_head), heads(k, self.n_kv_head), heads(v, self.n_kv_head)
        q, k = rotate_half(q, cos, sin), rotate_half(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, C))
        gate, up = self.gate_up(self.norm2(x)).split(self.ffn, dim=2)
        return x + self.down(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, vocab, T, m):
        super().__init__()
        C, n_head = m["n_embd"], m["n_head"]
        n_kv_head = m.get("n_kv_head") or n_head
        ffn = m.get("ffn_hidden") or 0
        if not ffn:  # runtime/nn/models.cpp llama_ffn_hidden: 2/3 of 4C, up to a multiple of 256
            ffn = (8 * C // 3 + 255) // 256 * 256
        eps, theta = m.get("norm_eps", 1e-5), m.get("rope_theta", 10000.0)
        self.wte = nn.Embedding(vocab, C)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        self.blocks = nn.ModuleList(
            LlamaBlock(C, n_head, n_kv_head, ffn, m["n_layer"], eps) for _ in range(m["n_layer"]))
        self.norm = RmsNorm(C, eps)
        self.head = nn.Linear(C, vocab, bias=False)
        hs = C // n_head
        inv = theta ** (-torch.arange(0, hs // 2, dtype=torch.float64) * 2 / hs)
        angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", angle.cos().float(), persistent=False)  # [T, hs/2], as rope.h's table
        self.register_buffer("sin", angle.sin().float(), persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.wte(ids)
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.blocks:
            x = b(x, cos, sin)
        return self.head(self.norm(x))


def build_model(m, sample_shape, classes):
    if m["kind"] == "mlp":
        return Mlp(int(np.prod(sample_shape)), m["hidden"], classes)
    if m["kind"] == "cnn":
        return Cnn(sample_shape, m["channels"], m["kernel_size"], m["fc_hidden"], classes)
    if m["kind"] == "gpt":
        vocab = m["vocab_size"] or classes
        return Gpt(vocab, m["block_size"] or sample_shape[0] - 1, m["n_embd"], m["n_head"], m["n_layer"])
    if m["kind"] == "llama":
        return Llama(m["vocab_size"] or classes, m["block_size"] or sample_shape[0] - 1, m)
    sys.exit(f"torch_reference: model.kind {m['kind']!r} is not supported")


def make_optimizer(model, o, fused=False):
    # Weight decay on weights and embeddings (2-D and up), not on biases or
    # LayerNorm gains: shardtrain's ParamSpec::decay.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    if o["kind"] == "sgd":
        return torch.optim.SGD(groups, lr=o["lr"], momentum=o["momentum"], dampening=o["dampening"],
                               nesterov=o["nesterov"])
    if o["kind"] == "adamw":
        return torch.optim.AdamW(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                 **({"fused": True} if fused else {}))
    sys.exit(f"torch_reference: optim.kind {o['kind']!r} is not supported")


def lr_at(step, base, s, total):
    """runtime/optim/schedule.cpp, the same formula."""
    if step < s["warmup_steps"]:
        return base * (step + 1) / s["warmup_steps"]
    if s["kind"] == "cosine":
        span = max(1, total - s["warmup_steps"])
        progress = min(1.0, (step - s["warmup_steps"]) / span)
        return s["min_lr"] + (base - s["min_lr"]) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if s["kind"] == "step":
        return base * s["gamma"] ** ((step - s["warmup_steps"]) // s["step_size"])
    return base


def synthetic_throughput(args, c, dev):
    """--synthetic: the step time of the config's GPT on random token
    windows (vocabulary model.vocab_size, T = model.block_size), no data
    set and no evaluation: the throughput side of the GPU check. The first
    step (torch.compile's compilation, cuBLAS's and the allocator's warm-up)
    is left out of the median."""
    tr, m, o = c["train"], c["model"], c["optim"]
    V, T = m["vocab_size"], m["block_size"]
    if m["kind"] != "gpt" or V <= 0 or T <= 0:
        sys.exit("torch_reference: --synthetic needs model.kind = gpt with model.vocab_size and model.block_size")
    model = build_model(m, (T + 1,), V).to(dev)
    opt = make_optimizer(model, o, fused=args.fused_adamw and dev.type == "cuda")
    net = torch.compile(model) if args.compile else model
    B = tr["global_batch_size"]
    gen = torch.Generator(device=dev).manual_seed(tr["seed"])
    times, losses = [], []
    for _ in range(args.steps):
        w = torch.randint(0, V, (B, T + 1), device=dev, generator=gen)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=args.amp == "bf16"):
            logits = net(w[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, V), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if o["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o["clip_grad_norm"])
        opt.step()
        losses.append(loss.item())  # waits for the step, as shardtrain reads its loss
        times.append(time.perf_counter() - t0)
    timed = times[1:] if len(times) > 1 else times
    result = {
        "framework": f"torch {torch.__version__}",
        "device": str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
        "mode": ("compile" if args.compile else "eager") + (" bf16-autocast" if args.amp == "bf16" else "")
        + (" fused-adamw" if args.fused_adamw and dev.type == "cuda" else ""),
        "model": "gpt", "batch": B, "tokens_per_step": B * T, "steps": len(times),
        "step_ms_median": 1e3 * statistics.median(timed),
        "first_step_ms": 1e3 * times[0],
        "tokens_per_s": B * T / statistics.median(timed),
        "samples_per_s": B / statistics.median(timed),
        "losses": losses,
    }
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="resolved config (the output of `shardtrain config FILE`)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process (default 1)")
    ap.add_argument("--gemm", default="tf32", choices=["f32", "tf32"], help="GPU matmul precision")
    ap.add_argument("--json", help="write the result here too (rank 0)")
    ap.add_argument("--synthetic", action="store_true",
                    help="gpt only: time --steps steps on random tokens, no data, no evaluation")
    ap.add_argument("--steps", type=int, default=12, help="--synthetic: steps to run (default 12)")
    ap.add_argument("--amp", default="none", choices=["none", "bf16"],
                    help="autocast the forward and the loss to bf16 (mixed precision)")
    ap.add_argument("--compile", action="store_true", help="--synthetic: torch.compile the model")
    ap.add_argument("--fused-adamw", action="store_true", help="--synthetic: AdamW's fused CUDA kernel")
    args = ap.parse_args()
    c = tomllib.load(open(args.config, "rb"))
    tr, d, m, o, sch, tgt = c["train"], c["data"], c["model"], c["optim"], c["schedule"], c["target"]

    torch.set_num_threads(args.threads)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = args.gemm == "tf32"
        torch.backends.cudnn.allow_tf32 = args.gemm == "tf32"
    if world > 1:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    torch.manual_seed(tr["seed"])
    if args.synthetic:
        return synthetic_throughput(args, c, dev)

    lm = m["kind"] in ("gpt", "llama")
    xtr, ytr, attrs, classes = load_split(d["train"], d["train_limit"])
    xte, yte, _, _ = load_split(d["test"], d["test_limit"])

    def prepare(x):
        if lm:
            return torch.from_numpy(x.astype(np.int64))
        mean, std = float(attrs.get("normalize_mean", 0.0)), float(attrs.get("normalize_std", 1.0))
        xf = x.astype(np.float32) / (255.0 if x.dtype == np.uint8 else 1.0)
        return torch.from_numpy((xf - mean) / std)

    Xtr, Ytr, Xte, Yte = prepare(xtr), torch.from_numpy(ytr), prepare(xte), torch.from_numpy(yte)
    sample_shape = tuple(xtr.shape[1:])
    model = build_model(m, sample_shape, classes).to(dev)
    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=c["parallel"]["ddp"]["bucket_mb"])
    opt = make_optimizer(model, o)

    B = tr["global_batch_size"]
    lo, hi = B * rank // world, B * (rank + 1) // world
    steps_per_epoch = len(Xtr) // B  # data.last_batch = "drop"
    total = steps_per_epoch * tr["epochs"]
    if tr["max_steps"] > 0:
        total = min(total, tr["max_steps"])

    def batch(X, Y, idx):
        if lm:  # windows of T+1 tokens: inputs and next-token labels
            w = X[idx]
            return w[:, :-1].to(dev, non_blocking=True), w[:, 1:].to(dev, non_blocking=True)
        return X[idx].to(dev, non_blocking=True), Y[idx].to(dev, non_blocking=True)

    def evaluate():
        """Mean loss and accuracy over the test split (its slice per rank, then summed)."""
        net.eval()
        n = len(Xte)
        first, last = n * rank // world, n * (rank + 1) // world
        loss, correct, count = 0.0, 0, 0
        with torch.no_grad():
            for s in range(first, last, tr["eval_batch_size"]):
                idx = torch.arange(s, min(last, s + tr["eval_batch_size"]))
                x, y = batch(Xte, Yte, idx)
                with autocast():
                    logits = model(x)
                logits, y = logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1)
                loss += F.cross_entropy(logits, y, reduction="sum").item()
                correct += (logits.argmax(-1) == y).sum().item()
                count += y.numel()
        t = torch.tensor([loss, correct, count], dtype=torch.float64)
        if world > 1:
            dist.all_reduce(t)
        net.train()
        return t[0].item() / t[2].item(), t[1].item() / t[2].item()

    def autocast():
        return torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=args.amp == "bf16")

    def reached(loss, acc):
        return acc >= tgt["value"] if tgt["metric"] == "test_accuracy" else loss <= tgt["value"]

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    gen = torch.Generator().manual_seed(tr["seed"])
    step, step_times, evals, time_to_target = 0, [], [], None
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    for epoch in range(tr["epochs"]):
        if step >= total or time_to_target is not None:
            break
        order = torch.randperm(len(Xtr), generator=gen)
        for b in range(steps_per_epoch):
            if step >= total:
                break
            t0 = time.perf_counter()
            idx = order[b * B + lo: b * B + hi]
            x, y = batch(Xtr, Ytr, idx)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, o["lr"], sch, total)
            with autocast():
                logits = net(x)
                # The mean over the global batch: DDP averages the ranks' means.
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if o["clip_grad_norm"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), o["clip_grad_norm"])
            opt.step()
            if not math.isfinite(loss.item()):  # as shardtrain: the loss read every step
                sys.exit(f"torch_reference: diverged at step {step}")
            sync()
            step_times.append(time.perf_counter() - t0)
            step += 1
        test_loss, acc = evaluate()
        evals.append({"step": step, "elapsed_s": time.perf_counter() - start, "test_loss": test_loss,
                      "test_accuracy": acc})
        if time_to_target is None and reached(test_loss, acc):
            time_to_target = time.perf_counter() - start
    if not evals or evals[-1]["step"] != step:
        test_loss, acc = evaluate()
        evals.append({"step": step, "elapsed_s": time.perf_counter() - start, "test_loss": test_loss,
                      "test_accuracy": acc})
        if time_to_target is None and reached(test_loss, acc):
            time_to_target = time.perf_counter() - start
    train_s = time.perf_counter() - start
    result = {
        "framework": f"torch {torch.__version__}",
        "device": str(dev) if args.device == "cpu" else torch.cuda.get_device_name(dev),
        "world_size": world,
        "threads": args.threads,
        "model": m["kind"],
        "amp": args.amp,
        "steps": step,
        "time_to_target_s": time_to_target,
        "train_time_s": train_s,
        "step_ms_mean": 1e3 * sum(step_times) / len(step_times),  # as shardtrain's timing.step_s
        "step_ms_median": 1e3 * statistics.median(step_times),
        "samples_per_s": B * len(step_times) / sum(step_times),
        "final": evals[-1],
        "evals": evals,
    }
    if rank == 0:
        print(json.dumps(result))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
