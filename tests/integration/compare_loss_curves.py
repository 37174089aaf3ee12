"""Two training runs' loss curves, step by step, from their `[train] ... step
N/M  loss X` lines (train.progress_every_s = 0 prints every step).

  compare_loss_curves.py REFERENCE.txt OTHER.txt --step-tol 0.03 --tail 30 --tail-tol 0.01

Fails (exit 1) unless both logs hold the same steps, the curves differ at
some step (identical curves mean the setting under test did nothing), every
step's loss is within step-tol (relative) of the reference's, and the mean
of the last `tail` steps within tail-tol. Prints one line of figures.
"""
import argparse
import re
import sys

LINE = re.compile(r"^\[train\] .*\bstep (\d+)/\d+\s+loss ([0-9.eE+-]+|nan|inf)")


def curve(path):
    losses = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                losses[int(m.group(1))] = float(m.group(2))
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--step-tol", type=float, required=True)
    ap.add_argument("--tail", type=int, required=True)
    ap.add_argument("--tail-tol", type=float, required=True)
    a = ap.parse_args()
    ref, other = curve(a.reference), curve(a.other)
    if not ref or sorted(ref) != sorted(other):
        print(f"the logs hold different steps: {len(ref)} and {len(other)} loss lines")
        return 1
    steps = sorted(ref)
    rel = {s: abs(other[s] - ref[s]) / abs(ref[s]) for s in steps}
    worst = max(steps, key=lambda s: rel[s])
    tail = steps[-a.tail:]
    ref_tail = sum(ref[s] for s in tail) / len(tail)
    other_tail = sum(other[s] for s in tail) / len(tail)
    tail_rel = abs(other_tail - ref_tail) / abs(ref_tail)
    print(f"{len(steps)} steps: largest step difference {100 * rel[worst]:.2f}% (step {worst}: "
          f"{other[worst]:.4f} against {ref[worst]:.4f}); last {len(tail)} steps' mean loss "
          f"{other_tail:.4f} against {ref_tail:.4f} ({100 * tail_rel:.2f}%)")
    if all(other[s] == ref[s] for s in steps):
        print("the curves are identical: the setting changed nothing")
        return 1
    if rel[worst] > a.step_tol:
        print(f"step {worst} differs by more than {100 * a.step_tol:.1f}%")
        return 1
    if tail_rel > a.tail_tol:
        print(f"the last {len(tail)} steps differ by more than {100 * a.tail_tol:.1f}% on average")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
