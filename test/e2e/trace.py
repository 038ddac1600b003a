"""--trace against the schedule and the ledger.

usage: trace.py SHARDC MODEL.mlir OUT_DIR [cudasim]

Builds each configuration with --ledger-json, trains 2 steps with --trace,
evaluating before the first and after the last (--eval-every 2), and checks
the timeline it writes (Chrome's trace event format):

- one process per rank, named by its mesh coordinates, with a `compute`
  track and `comm` tracks;
- on each rank, each step holds as many collectives of each kind as the
  ledger counts, sending the ledger's bytes, each named with what it
  carries (a param, a unit, a bucket, the loss: one all-reduce);
- the memory counter's maximum on each rank is the ledger's peak;
- the compute track's spans nest (steps, the units' forward and backward
  regions, kernel calls, reading each input and, on the host, waits), each
  inside a step, which reads each of the model's inputs once per step;
- no two collectives overlap on one comm track, and the regions are every
  unit's forward and backward, and with --recompute '*' its recomputation
  (inside its backward), once per micro-batch; with --offload-optimizer,
  and only then, each step holds regions "update on host" (the copies and
  the host's updates);
- where the schedule overlaps them, some collective is in flight while a
  kernel runs: the overlap prefetch and async reductions buy;
- each evaluation is a span holding every unit's forward once per
  micro-batch and no backward, one all-reduce (the loss's) and no
  reduce-scatter, each input read once, and the memory counter's maximum
  inside it is the ledger's eval peak.

Prints a line per configuration; exits 1 unless every check holds.
"""

import json
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

# (strategy, mesh, flags, whether the schedule overlaps communication with
# kernels: the tiny GPT's gradients fill one DDP bucket, and one flat
# ZeRO-2 bucket, reduced after the whole backward).
CONFIGS = [
    ("zero3", "2", [], True),
    ("ddp", "2", [], False),
    ("zero2", "2", ["--layout", "flat", "--grad-accum", "2"], False),
    ("hsdp", "2x2", ["--param-dtype", "bf16"], True),
    ("zero3", "2", ["--recompute", "*"], True),
    ("zero3", "2", ["--grad-accum", "2", "--grad-sync", "microbatch"], True),
    ("zero3", "2", ["--param-dtype", "bf16", "--offload-optimizer", "true"],
     True),
]
# cudasim runs one stream at a time: its collectives never overlap kernels.
CUDASIM_CONFIGS = [
    ("zero3", "2", [], False),
    ("hsdp", "2x2", ["--layout", "flat"], False),
    ("zero3", "2", ["--offload-optimizer", "true"], False),
    # Each gather's copy from host memory on its stream, inside its span.
    ("hsdp", "2x1", ["--offload-optimizer", "true", "--offload-params",
                     "true"], False),
]
STEPS = 2
EVALS = ["eval at step 0 batch 0", "eval at step %d batch 0" % STEPS]
KINDS = ("all_gather", "reduce_scatter", "all_reduce")
# The compute track's spans that are not kernel calls.
REGION = r"(step|eval|forward|backward|recompute|wait|input|update) "


def units_of(model):
    with open(model) as f:
        return re.findall(r'train\.unit\s+"([^"]+)"', f.read())


def inputs_of(model):
    with open(model) as f:
        return re.findall(r'train\.input\s+"([^"]+)"', f.read())


def in_nanoseconds(trace):
    """The trace with every time in integer nanoseconds, the resolution it is
    written in (microseconds, 3 decimals): spans that touch compare equal,
    where the floats' ts + dur could land a rounding apart."""
    for e in trace["traceEvents"]:
        for key in ("ts", "dur"):
            if key in e:
                e[key] = round(e[key] * 1000)
    return trace


def nests(spans):
    """Whether spans [(begin, end, name)] on one track nest: each one lies
    inside, or after, the one open when it begins. Returns "" or why not."""
    stack = []
    for begin, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][1] <= begin:
            stack.pop()
        if stack and end > stack[-1][1]:
            return "%s [%.3f, %.3f] crosses %s [%.3f, %.3f]" % (
                name, begin, end, stack[-1][2], stack[-1][0], stack[-1][1])
        stack.append((begin, end, name))
    return ""


def check(trace, ledger, units, input_names, ranks, accum, recompute, host):
    """The problems found in one configuration's trace, as strings."""
    problems = []
    events = trace["traceEvents"]
    # Processes and tracks count from 1 (rank r is process r + 1): viewers
    # treat 0 as the kernel's idle task.
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    if sorted(names) != list(range(1, ranks + 1)) or not all(
            names[r + 1].startswith("rank %d" % r) for r in range(ranks)):
        problems.append("processes %s, expected ranks 0..%d" %
                        (names, ranks - 1))
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e["ph"] == "M" and e["name"] == "thread_name"}
    comm = ledger["comm"]
    for rank in range(ranks):
        mine = [e for e in events if e["pid"] == rank + 1 and e["ph"] != "M"]
        compute = [e for e in mine if e["ph"] == "X" and e["tid"] == 1]
        steps = sorted((e for e in compute if e["name"].startswith("step ")),
                       key=lambda e: e["ts"])
        if [e["name"] for e in steps] != ["step %d" % (s + 1)
                                          for s in range(STEPS)]:
            problems.append("rank %d: steps %s" %
                            (rank, [e["name"] for e in steps]))
            continue
        why = nests([(e["ts"], e["ts"] + e["dur"], e["name"])
                     for e in compute])
        if why:
            problems.append("rank %d: the compute track does not nest: %s" %
                            (rank, why))
        peak = max(e["args"]["live bytes"] for e in mine if e["ph"] == "C")
        if peak != ledger["per_rank"]["peak_bytes"]:
            problems.append("rank %d: memory counter peaks at %d, ledger %d"
                            % (rank, peak, ledger["per_rank"]["peak_bytes"]))
        if tracks.get((rank + 1, 1)) != "compute":
            problems.append("rank %d: track 1 is %r" %
                            (rank, tracks.get((rank + 1, 1))))
        collectives = [e for e in mine if e["ph"] == "X" and e["tid"] > 1]
        for e in collectives:
            if not tracks.get((rank + 1, e["tid"]), "").startswith("comm "):
                problems.append("rank %d: %s on track %r" %
                                (rank, e["name"],
                                 tracks.get((rank + 1, e["tid"]))))
        for tid in {e["tid"] for e in collectives}:
            lane = sorted((e["ts"], e["ts"] + e["dur"]) for e in collectives
                          if e["tid"] == tid)
            if any(b[0] < a[1] for a, b in zip(lane, lane[1:])):
                problems.append("rank %d: collectives overlap on %r" %
                                (rank, tracks[(rank + 1, tid)]))
        for step in steps:
            begin, end = step["ts"], step["ts"] + step["dur"]

            def inside(e):
                return begin <= e["ts"] and e["ts"] + e["dur"] <= end
            # "all_gather h.0.attn.c_attn.weight": the kind, and what the
            # collective carries.
            mine_now = [e for e in collectives if inside(e)]
            # An NCCL group is one span of several calls.
            kinds, sent = Counter(), Counter()
            for e in mine_now:
                kinds[e["name"].split(" ")[0]] += e["args"].get("calls", 1)
                sent[e["name"].split(" ")[0]] += e["args"]["bytes sent"]
            unlabelled = [e["name"] for e in mine_now
                          if len(e["name"].split(" ", 1)) < 2]
            if unlabelled:
                problems.append("rank %d %s: collectives that say not what "
                                "they carry: %s" % (rank, step["name"],
                                                    unlabelled[:3]))
            losses = sum(1 for e in mine_now if e["name"] == "all_reduce loss")
            if losses != 1:
                problems.append("rank %d %s: %d all-reduces of the loss" %
                                (rank, step["name"], losses))
            for kind in KINDS:
                if (kinds[kind], sent[kind]) != (comm[kind + "_count"],
                                                 comm[kind + "_bytes"]):
                    problems.append(
                        "rank %d %s: %d %s sending %d bytes, ledger %d "
                        "sending %d" % (rank, step["name"], kinds[kind], kind,
                                        sent[kind], comm[kind + "_count"],
                                        comm[kind + "_bytes"]))
            kinds_of_region = ["forward", "backward"] + (
                ["recompute"] if recompute else [])
            problems += check_regions_and_inputs(
                compute, inside, "rank %d %s" % (rank, step["name"]),
                units, kinds_of_region, accum, input_names)
            waits = sum(1 for e in compute
                        if inside(e) and e["name"].startswith("wait "))
            if host and waits != sum(kinds.values()):
                problems.append("rank %d %s: %d waits for %d collectives" %
                                (rank, step["name"], waits,
                                 sum(kinds.values())))
            # An offloaded optimizer's copies and updates on the host.
            updates = sum(1 for e in compute
                          if inside(e) and e["name"] == "update on host")
            if (updates > 0) != ledger.get("offload_optimizer", False):
                problems.append("rank %d %s: %d updates on the host" %
                                (rank, step["name"], updates))
            kernels = [e for e in compute if inside(e) and
                       not re.match(REGION, e["name"])]
            if not kernels:
                problems.append("rank %d %s: no kernel calls" %
                                (rank, step["name"]))
        problems += check_evals(mine, compute, collectives, ledger, units,
                                input_names, rank, accum)
    return problems


def check_regions_and_inputs(compute, inside, where, units, kinds, accum,
                             input_names):
    """The problems in the compute spans `inside` a step or an evaluation:
    each unit's region of each of `kinds` (of forward, backward and
    recompute) once per micro-batch and no other, and each input read
    once."""
    regions = Counter(e["name"] for e in compute if inside(e) and
                      e["name"].split(" ")[0] in (
                          "forward", "backward", "recompute"))
    expected = Counter({kind + " " + unit: accum for unit in units
                        for kind in kinds})
    problems = []
    if regions != expected:
        problems.append("%s: regions %s, expected %s" %
                        (where, dict(regions), dict(expected)))
    inputs = Counter(e["name"] for e in compute
                     if inside(e) and e["name"].startswith("input "))
    if inputs != Counter({"input " + name: 1 for name in input_names}):
        problems.append("%s: inputs read %s" % (where, dict(inputs)))
    return problems


def check_evals(mine, compute, collectives, ledger, units, input_names, rank,
                accum):
    """The problems found in one rank's evaluations."""
    evals = sorted((e for e in compute if e["name"].startswith("eval ")),
                   key=lambda e: e["ts"])
    if [e["name"] for e in evals] != EVALS:
        return ["rank %d: evaluations %s, expected %s" %
                (rank, [e["name"] for e in evals], EVALS)]
    problems = []
    for ev in evals:
        begin, end = ev["ts"], ev["ts"] + ev["dur"]

        def inside(e):
            return begin <= e["ts"] and e["ts"] + e.get("dur", 0) <= end
        kinds = Counter(e["name"] for e in collectives if inside(e)
                        and not e["name"].startswith("all_gather "))
        if kinds != Counter({"all_reduce loss": 1}):
            problems.append("rank %d %s: collectives %s besides gathers, "
                            "expected the loss's all-reduce" %
                            (rank, ev["name"], dict(kinds)))
        problems += check_regions_and_inputs(
            compute, inside, "rank %d %s" % (rank, ev["name"]), units,
            ["forward"], accum, input_names)
        peak = max((e["args"]["live bytes"] for e in mine
                    if e["ph"] == "C" and inside(e)), default=0)
        if peak != ledger["per_rank"]["eval_peak_bytes"]:
            problems.append("rank %d %s: memory counter peaks at %d, ledger "
                            "%d" % (rank, ev["name"], peak,
                                    ledger["per_rank"]["eval_peak_bytes"]))
    return problems


def overlap(trace, rank):
    """Microseconds of rank's kernel calls during which a collective is in
    flight, and of all its kernel calls."""
    events = [e for e in trace["traceEvents"]
              if e.get("pid") == rank + 1 and e["ph"] == "X"]
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events
               if e["tid"] == 1 and not re.match(REGION, e["name"])]
    flights = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["tid"] > 1]
    covered = 0.0
    for begin, end in kernels:
        # The part of [begin, end) inside the union of the flights.
        cuts = sorted((max(b, begin), min(e, end)) for b, e in flights
                      if b < end and e > begin)
        last = begin
        for b, e in cuts:
            b = max(b, last)
            if e > b:
                covered += e - b
                last = e
    return covered, sum(end - begin for begin, end in kernels)


def main():
    shardc, model, out_dir = sys.argv[1:4]
    target = sys.argv[4] if len(sys.argv) > 4 else "host"
    os.makedirs(out_dir, exist_ok=True)
    units = units_of(model)
    failures = 0
    for strategy, mesh, extra, overlaps in (
            CUDASIM_CONFIGS if target == "cudasim" else CONFIGS):
        tag = "-".join([target, strategy, mesh] +
                       [e.strip("-*") for e in extra if e.strip("-*")])
        exe = os.path.join(out_dir, tag)
        lib.run([shardc, "build", model, "--strategy", strategy, "--mesh",
                 mesh, "--target", target, "--quiet", "-o", exe,
                 "--ledger-json", exe + ".ledger.json"] + extra)
        cmd = [exe, "--steps", str(STEPS), "--quiet", "--trace",
               exe + ".trace.json", "--eval-every", str(STEPS),
               "--eval-batches", "1"]
        ranks = lib.ranks(mesh)
        if ranks > 1:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x",
                   "OPENBLAS_NUM_THREADS=1", "-np", str(ranks)] + cmd
        lib.run(cmd)
        with open(exe + ".trace.json") as f:
            trace = in_nanoseconds(json.load(f))
        with open(exe + ".ledger.json") as f:
            ledger = json.load(f)
        accum = int(extra[extra.index("--grad-accum") + 1]) \
            if "--grad-accum" in extra else 1
        problems = check(trace, ledger, units, inputs_of(model), ranks,
                         accum, "--recompute" in extra, target == "host")
        covered, busy = overlap(trace, 0)
        if overlaps and covered <= 0:
            problems.append("rank 0: no kernel runs while a collective is "
                            "in flight")
        failures += bool(problems)
        counts = " ".join("%s %d" % (k, ledger["comm"][k + "_count"])
                          for k in KINDS)
        print("%-32s %s; peak %d; overlap %.0f%% of kernel time %s" %
              (tag, counts, ledger["per_rank"]["peak_bytes"],
               100 * covered / busy if busy else 0,
               "ok" if not problems else "FAIL"))
        for p in problems[:10]:
            print("  " + p)
    print("trace: %d configurations off the schedule" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
