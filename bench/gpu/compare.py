#!/usr/bin/env python3
"""Helpers of bench/gpu/run.sh; standard library only (no numpy here).

  compare.py tokens OUT.bin --tokens N --vocab V --seed S
      an llm.c token file (header of 256 int32 [20240520, 1, N], then N
      uint16 tokens), uniform in [0, V), from its own LCG: the same bytes on
      every machine.
  compare.py check --ref-log A --ref-export X --log B --export Y
                   [--rtol 1e-4 --atol 1e-6] [--outliers K --outlier-bound E]
                   [--label L]
      GPU run (B, Y) against the CPU run (A, X): every step's loss and every
      element of every exported param (with --param-dtype bf16: the f32
      masters) must satisfy |gpu - cpu| <= rtol * max(|gpu|, |cpu|) + atol,
      except at most K elements (default 0), each within |gpu - cpu| <= E.
      Exit 0 on pass.
  compare.py validate --log A --export X --steps K
      one run alone: K finite losses and a readable, finite export.
  compare.py shardc-row --log L --warmup W ... --peak-tflops P
                        [--precision fp32|bf16] --out ROW.json
      a table row from a shardc executable's --log-json; MFU against P.
  compare.py table ROWS.json... [--markdown]
      the final table from row files.
  compare.py kernels BENCH.out TORCH.out
      shardc-rt-kernel-bench's rows beside torch_kernels.py's, one markdown
      table: per kernel, both times and PyTorch's speed over shardc's;
      then the bench's "# flash phases:" lines (where the instrumented
      flash kernels' warps spend their cycles), a list item each.
  compare.py variants BENCH.out KERNEL_TEST.out [--margin 0.03]
      the runtime's kernel variants (VARIANTS) to run with: per kernel, the
      fastest of its default row and its variants' rows in the kernel
      bench, a variant only where the kernel test passed its checks and
      it beats the default by more than the margin. A line per kernel:
      "set VAR=VALUE: why" for a variant taken, "keep KERNEL: why" else.
"""

import argparse
import json
import math
import os
import statistics
import struct
import sys
from array import array

# ---------------------------------------------------------------------------
# Files


def write_tokens(path, count, vocab, seed):
    if vocab > 65536:
        raise SystemExit("tokens: vocab %d does not fit uint16" % vocab)
    state = (seed * 2862933555777941757 + 3037000493) % 2**64
    tokens = array("H")
    for _ in range(count):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        tokens.append((state >> 33) % vocab)
    if sys.byteorder != "little":
        tokens.byteswap()
    header = array("i", [20240520, 1, count] + [0] * 253)
    if sys.byteorder != "little":
        header.byteswap()
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


def read_safetensors(path):
    """{name: (shape, array('f'))} of the F32 tensors in `path`."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit("%s: tensor %s has dtype %s, expected F32" %
                             (path, name, info["dtype"]))
        begin, end = info["data_offsets"]
        values = array("f")
        values.frombytes(blob[base + begin:base + end])
        if sys.byteorder != "little":
            values.byteswap()
        out[name] = (info["shape"], values)
    return out


def loss_of(row, key="loss"):
    """A log line's loss (or eval_loss); a diverged one (null in the log) is
    NaN."""
    return math.nan if row[key] is None else float(row[key])


def read_log(path, key="loss"):
    """The lines of a --log-json file that carry `key`: the steps' (loss),
    or the evaluations' (eval_loss, --eval-every)."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [row for row in rows if key in row]


# ---------------------------------------------------------------------------
# check / validate


def close(a, b, rtol, atol):
    if math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + atol


def cmd_check(args):
    label = args.label + ": " if args.label else ""
    ok = True
    worst_loss = 0.0
    # The steps' losses, then the evaluations' (--eval-every: the evaluation
    # step, emitted and run beside the step).
    for key, what in (("loss", "step"), ("eval_loss", "eval at step")):
        ref, got = read_log(args.ref_log, key), read_log(args.log, key)
        if len(ref) != len(got) or (key == "loss" and not ref):
            print("%s%s: %d CPU, %d GPU: FAIL" %
                  (label, key, len(ref), len(got)))
            ok = False
        for r, g in zip(ref, got):
            a, b = loss_of(r, key), loss_of(g, key)
            rel = abs(a - b) / max(abs(a), abs(b), 1e-30)
            worst_loss = max(worst_loss, rel)
            status = "ok" if close(a, b, args.rtol, args.atol) else "FAIL"
            ok &= status == "ok"
            print("%s%s %d loss cpu %.9g gpu %.9g rel %.2e %s" %
                  (label, what, r["step"], a, b, rel, status))
    cpu, gpu = read_safetensors(args.ref_export), read_safetensors(args.export)
    if set(cpu) != set(gpu):
        print("%sparams differ: only cpu %s, only gpu %s: FAIL" %
              (label, sorted(set(cpu) - set(gpu)), sorted(set(gpu) - set(cpu))))
        ok = False
    bad_total, elems, worst = 0, 0, (0.0, "", 0, 0.0, 0.0)
    worst_outlier = 0.0
    for name in sorted(set(cpu) & set(gpu)):
        (sa, a), (sb, b) = cpu[name], gpu[name]
        if sa != sb:
            print("%s%s: shape cpu %s gpu %s: FAIL" % (label, name, sa, sb))
            ok = False
            continue
        bad = 0
        for i, (x, y) in enumerate(zip(a, b)):
            if not close(x, y, args.rtol, args.atol):
                bad += 1
                worst_outlier = max(worst_outlier, abs(x - y)
                                    if not (math.isnan(x) or math.isnan(y))
                                    else math.inf)
            # Excess over the allowance, so the worst is the nearest to fail.
            excess = abs(x - y) - args.rtol * max(abs(x), abs(y)) - args.atol
            if math.isnan(x) or math.isnan(y):
                excess = math.inf
            if excess > worst[0] or not worst[1]:
                worst = (excess, name, i, x, y)
        elems += len(a)
        if bad:
            print("%s%s: %d of %d elements outside tolerance" %
                  (label, name, bad, len(a)))
        bad_total += bad
    outliers_ok = bad_total <= args.outliers and (
        bad_total == 0 or worst_outlier <= args.outlier_bound)
    if args.outliers:
        print("%soutliers: %d allowed, each within %g; %d, the largest %.2e: %s"
              % (label, args.outliers, args.outlier_bound, bad_total,
                 worst_outlier, "ok" if outliers_ok else "FAIL"))
    ok &= outliers_ok
    _, name, i, x, y = worst
    print("%sparams: %d tensors, %d elements, %d outside tolerance; nearest "
          "to the bound: %s[%d] cpu %.9g gpu %.9g (|diff| %.2e)" %
          (label, len(cpu), elems, bad_total, name, i, x, y, abs(x - y)))
    print("%stolerance: |gpu - cpu| <= %g * max(|gpu|, |cpu|) + %g (relative, "
          "with an absolute floor); worst loss rel diff %.2e: %s" %
          (label, args.rtol, args.atol, worst_loss, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


def cmd_validate(args):
    ok = True
    rows = read_log(args.log)
    losses = [loss_of(r) for r in rows]
    if len(rows) != args.steps or not all(math.isfinite(x) for x in losses):
        ok = False
    evals = [loss_of(r, "eval_loss") for r in read_log(args.log, "eval_loss")]
    ok &= all(math.isfinite(x) for x in evals)
    print("%d steps, losses %s%s" % (
        len(rows), " ".join("%.6f" % x for x in losses),
        "; eval losses " + " ".join("%.6f" % x for x in evals) if evals else ""))
    params = read_safetensors(args.export)
    elems = sum(len(v) for _, v in params.values())
    finite = all(math.isfinite(x) for _, v in params.values() for x in v)
    ok &= finite and elems > 0
    print("export: %d tensors, %d elements, %s" %
          (len(params), elems, "all finite" if finite else "NOT FINITE"))
    return 0 if ok else 1


# ---------------------------------------------------------------------------
# rows and the table


def flops_per_token(n_params, layers, seq, hidden):
    # llm.c's convention (and nanoGPT's estimate_mfu): 6 N for the matmuls
    # with the weights, forward and backward, plus 6 L T C for attention.
    return 6 * n_params + 6 * layers * seq * hidden


def cmd_shardc_row(args):
    rows = read_log(args.log)
    measured = rows[args.warmup:]
    row = {"name": args.name, "batch": args.batch,
           "precision": args.precision, "peak_tflops": args.peak_tflops}
    if not measured:
        row["status"] = "FAILED: %d log lines, none after %d warm-up steps" % (
            len(rows), args.warmup)
    else:
        ms = statistics.median(r["step_ms"] for r in measured)
        tok_s = args.batch * args.seq / (ms / 1e3)
        fpt = flops_per_token(args.params, args.layers, args.seq, args.hidden)
        row.update({
            "status": "ok",
            "ms": ms,
            "ms_min": min(r["step_ms"] for r in measured),
            "ms_max": max(r["step_ms"] for r in measured),
            "tok_s": tok_s,
            "tflops": fpt * tok_s / 1e12,
            "mfu": fpt * tok_s / (args.peak_tflops * 1e12),
            "peak_gb": max(r["peak_bytes"] for r in rows) / 1e9,
            "predicted_gb": rows[0]["predicted_peak_bytes"] / 1e9,
            # the kernels' workspaces, outside the allocator and the ledger
            "workspace_gb": max(r.get("workspace_bytes", 0)
                                for r in rows) / 1e9,
            "first_loss": rows[0]["loss"],
            "steps": len(measured),
        })
        if not all(math.isfinite(loss_of(r)) for r in rows):
            row["status"] = "FAILED: non-finite loss"
    if args.smi_gb is not None:
        row["smi_gb"] = args.smi_gb
    if args.ledger and os.path.exists(args.ledger):
        with open(args.ledger) as f:
            timeline = json.load(f).get("timeline")
        if timeline:
            row["predicted_ms"] = timeline["step_ms"]
    with open(args.out, "w") as f:
        json.dump(row, f)
    return 0


def fmt(value, spec):
    return "" if value is None else spec % value


def cmd_table(args):
    rows = []
    for path in args.rows:
        with open(path) as f:
            rows.append(json.load(f))
    head = ["run", "batch", "ms/step", "pred ms", "tokens/s", "MFU", "peak GB",
            "work GB", "smi GB", "status"]
    lines = []
    for r in rows:
        ok = r.get("status", "").startswith("ok")
        peak = ""
        if ok and "peak_gb" in r:
            peak = "%.2f" % r["peak_gb"]
            if r.get("predicted_gb") is not None:
                peak += " / %.2f" % r["predicted_gb"]
        lines.append([
            r["name"],
            str(r.get("batch") or ""),
            fmt(r.get("ms") if ok else None, "%.1f"),
            fmt(r.get("predicted_ms") if ok else None, "%.1f"),
            fmt(r.get("tok_s") if ok else None, "%.0f"),
            fmt(100 * r["mfu"] if ok and "mfu" in r else None, "%.1f%%"),
            peak,
            fmt(r.get("workspace_gb") if ok and r.get("workspace_gb")
                else None, "%.2f"),
            fmt(r.get("smi_gb") if ok else None, "%.1f"),
            r.get("status", ""),
        ])
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for line in lines:
            print("| " + " | ".join(c.replace("|", "/") for c in line) + " |")
        return 0
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    widths[-1] = len(head[-1])  # the status may run long: leave it ragged
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    return 0


def bench_rows(path, prefix=""):
    """A kernel bench's rows (or torch_kernels.py's, PREFIX "torch"): name
    -> (shape, ms per call, the words after the floor's ms)."""
    found = {}
    try:
        with open(path) as f:
            for line in f:
                words = line.split()
                if line.startswith("#") or not words:
                    continue
                if prefix:
                    if words[0] != prefix:
                        continue
                    words = words[1:]
                try:
                    # the kernel's name may hold spaces: the shape is
                    # the first word after it with an "x" or a digit
                    at = next(i for i, w in enumerate(words)
                              if i > 0 and w[:1].isdigit())
                    found[" ".join(words[:at])] = (
                        words[at], float(words[at + 1]), words[at + 3:])
                except (StopIteration, IndexError, ValueError):
                    continue
    except OSError:
        pass
    return found


def cmd_kernels(args):
    ours, theirs = bench_rows(args.bench), bench_rows(args.torch, "torch")
    print("| kernel | shape | shardc ms | of its floor | PyTorch ms "
          "| PyTorch's speed over shardc's |")
    print("|---|---|---|---|---|---|")
    for kernel, (shape, ms, rest) in ours.items():
        share = rest[0] + " of " + " ".join(rest[1:]) if rest else ""
        # a variant row ("attention (cudnn)") beside PyTorch's row of the
        # name before its parenthesis, where PyTorch has one; not the
        # instrumented kernels' ("attention (phases)"), slower on purpose
        torch = theirs.get(kernel) or (
            None if kernel.endswith(" (phases)")
            else theirs.get(kernel.split(" (")[0]))
        print("| %s | %s | %.3f | %s | %s | %s |" % (
            kernel, shape, ms, share,
            "%.3f" % torch[1] if torch else "",
            "%.2fx" % (ms / torch[1]) if torch and torch[1] > 0 else ""))
    # where the instrumented flash kernels' warps spend their cycles
    try:
        with open(args.bench) as f:
            phases = [line[2:].strip() for line in f
                      if line.startswith("# flash phases:")]
    except OSError:
        phases = []
    if phases:
        print()
        for line in phases:
            print("- " + line)
    return 0 if ours else 1


# The runtime's kernel variants the kernel bench times beside their
# default (runtime/cuda/KernelState.cpp reads the variables in create): the
# default's row, the variant's row, the variable that selects it, and the
# tag of the kernel test's checks of it (its "ok"/"FAIL" lines).
VARIANTS = [
    ("attention", "attention (two tiles)",
     "SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2", "(two-tile flash forward"),
    ("attention_grad", "attention_grad (two tiles)",
     "SHARDC_RT_CUDA_FLASH_BACKWARD_TILES=2", "(two-tile flash backward"),
    ("attention_grad", "attention_grad (bulk dq)",
     "SHARDC_RT_CUDA_FLASH_DQ=bulk", "(bulk dq flash"),
    ("attention_grad", "attention_grad (whole steps)",
     "SHARDC_RT_CUDA_FLASH_STEPS=whole", "(whole-step flash"),
    ("cross_entropy_and_grad", "cross_entropy (online)",
     "SHARDC_RT_CUDA_CROSS_ENTROPY=online", "(online)"),
]


def cmd_variants(args):
    times = {name: ms for name, (_, ms, _) in bench_rows(args.bench).items()}
    try:
        with open(args.kernel_test) as f:
            checks = [line for line in f if line.startswith(("ok ", "FAIL"))]
    except OSError:
        checks = []

    def checked(tag):
        return (any(line.startswith("ok ") and tag in line for line in checks)
                and not any(line.startswith("FAIL") and tag in line
                            for line in checks))

    for default in dict.fromkeys(d for d, _, _, _ in VARIANTS):
        if default not in times:
            print("keep %s: the bench has no row of it" % default)
            continue
        base = times[default]
        best, why = None, []
        for _, row, assignment, tag in (v for v in VARIANTS
                                        if v[0] == default):
            if row not in times:
                why.append("%s: not timed" % row)
            elif not checked(tag):
                why.append("%s: %.3f ms, not passed by the kernel test's "
                           "\"%s\" checks" % (row, times[row], tag))
            else:
                why.append("%s: %.3f ms (%s)" % (
                    row, times[row],
                    "%.2fx" % (times[row] / base) if base > 0 else "?x"))
                if (times[row] < base * (1 - args.margin)
                        and (best is None or times[row] < times[best[0]])):
                    best = (row, assignment)
        others = "; ".join(why)
        if best:
            print("set %s: %s %.3f ms against %s %.3f ms; %s"
                  % (best[1], best[0], times[best[0]], default, base, others))
        else:
            print("keep %s: %.3f ms; %s (no checked variant faster by over %g%%)"
                  % (default, base, others, 100 * args.margin))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tokens")
    t.add_argument("out")
    t.add_argument("--tokens", type=int, required=True)
    t.add_argument("--vocab", type=int, required=True)
    t.add_argument("--seed", type=int, default=0)

    c = sub.add_parser("check")
    c.add_argument("--ref-log", required=True)
    c.add_argument("--ref-export", required=True)
    c.add_argument("--log", required=True)
    c.add_argument("--export", required=True)
    c.add_argument("--rtol", type=float, default=1e-4)
    c.add_argument("--atol", type=float, default=1e-6)
    c.add_argument("--outliers", type=int, default=0)
    c.add_argument("--outlier-bound", type=float, default=0.0)
    c.add_argument("--label", default="")

    v = sub.add_parser("validate")
    v.add_argument("--log", required=True)
    v.add_argument("--export", required=True)
    v.add_argument("--steps", type=int, required=True)

    r = sub.add_parser("shardc-row")
    r.add_argument("--log", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--warmup", type=int, required=True)
    r.add_argument("--batch", type=int, required=True)
    r.add_argument("--seq", type=int, required=True)
    r.add_argument("--hidden", type=int, required=True)
    r.add_argument("--layers", type=int, required=True)
    r.add_argument("--params", type=int, required=True)
    r.add_argument("--peak-tflops", type=float, required=True)
    r.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    r.add_argument("--smi-gb", type=float)
    r.add_argument("--ledger", help="the ledger's JSON: its timeline's step_ms")
    r.add_argument("--out", required=True)

    b = sub.add_parser("table")
    b.add_argument("rows", nargs="*")
    b.add_argument("--markdown", action="store_true")

    k = sub.add_parser("kernels")
    k.add_argument("bench")
    k.add_argument("torch")

    n = sub.add_parser("variants")
    n.add_argument("bench")
    n.add_argument("kernel_test")
    n.add_argument("--margin", type=float, default=0.03,
                   help="how much faster than the default a variant must be")

    args = p.parse_args()
    if args.cmd == "tokens":
        write_tokens(args.out, args.tokens, args.vocab, args.seed)
        return 0
    return {"check": cmd_check, "validate": cmd_validate,
            "shardc-row": cmd_shardc_row, "table": cmd_table,
            "kernels": cmd_kernels, "variants": cmd_variants}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
