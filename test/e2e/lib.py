"""Helpers for the e2e tests: build and run steps with shardc, read what
they write (safetensors, --log-json lines)."""

import json
import os
import struct
import subprocess
import sys
import time


class Checks:
    """Prints a row per check, ok or FAIL, and counts the failures."""

    def __init__(self):
        self.failures = 0

    def __call__(self, ok, text):
        self.failures += not ok
        print("%-4s %s" % ("ok" if ok else "FAIL", text))


def read_safetensors(path):
    """{name: (shape, list of floats)} of an F32 safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (path, name, info["dtype"])
        begin, end = info["data_offsets"]
        count = (end - begin) // 4
        tensors[name] = (info["shape"],
                         struct.unpack("<%df" % count, body[begin:end]))
    return tensors


def write_safetensors(path, tensors):
    """Writes {name: (dtype, shape, bytes)}."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


TOKEN_MAGIC = 20240520


def write_tokens(path, values, magic=TOKEN_MAGIC, count=None):
    """An llm.c token file: a 256-int32 header (magic, version 1, the token
    count: `count` where given, else that of `values`), then uint16 tokens."""
    header = [magic, 1, len(values) if count is None else count] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(values), *values))


def start_logging(command, log):
    """Starts `command` (a training run) with --log-json `log`, the file
    removed first, and returns it once it has logged a line (or ended, or
    after 60 s): a run to change something under while it trains. Its
    stderr is a text pipe."""
    if os.path.exists(log):
        os.remove(log)
    run = subprocess.Popen(command + ["--quiet", "--steps", "100000000",
                                      "--log-json", log],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    deadline = time.time() + 60
    while time.time() < deadline and run.poll() is None and not (
            os.path.exists(log) and os.path.getsize(log) > 0):
        time.sleep(0.05)
    return run


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def max_param_diff(a, b):
    """The largest |a - b| over every element of every param; both files
    must hold the same names and shapes."""
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    worst = 0.0
    for name in a:
        assert a[name][0] == b[name][0], (name, a[name][0], b[name][0])
        for x, y in zip(a[name][1], b[name][1]):
            worst = max(worst, abs(x - y))
    return worst


def differences(ref_log, ref_params, log, params_path):
    """A run against a reference run of as many steps: the largest loss
    difference over the steps and the largest param difference (ref_params
    as read_safetensors returns them; params_path the run's export)."""
    loss = max(abs(a["loss"] - b["loss"]) for a, b in zip(log, ref_log))
    return loss, max_param_diff(ref_params, read_safetensors(params_path))


def follows(reference, log, params_path, steps, tolerance):
    """Whether a run of `steps` steps follows `reference` (its log and its
    params as read_safetensors returns them) within `tolerance`; with the
    loss and param differences."""
    ref_log, ref_params = reference
    loss_diff, param_diff = differences(ref_log, ref_params, log, params_path)
    ok = (len(log) == steps and loss_diff <= tolerance and
          param_diff <= tolerance)
    return ok, loss_diff, param_diff


def generate(shardc_gen, out_dir, name, args):
    """Writes `shardc-gen ARGS` to OUT_DIR/NAME.mlir; returns its path."""
    path = os.path.join(out_dir, name + ".mlir")
    result = run([shardc_gen] + list(args))
    with open(path, "w") as f:
        f.write(result.stdout)
    return path


def emitted_step(shardc, model, source, args):
    """The text of the training step `shardc emit MODEL ARGS` writes to
    SOURCE: its `step` function, not the evaluation step beside it."""
    run([shardc, "emit", model, "--quiet", "-o", source] + list(args))
    with open(source) as f:
        text = f.read()
    begin = text.index("\nvoid step(")
    return text[begin:text.index("\n}\n", begin)]


def run(cmd, timeout=600, **kwargs):
    """Runs a command; on failure or a hang (no end within `timeout`
    seconds) prints it with its output and exits 1. On stderr too, which
    lit shows whole, where FileCheck's dump of stdout is cut short."""
    def fail(text):
        print(text)
        print(text, file=sys.stderr)
        sys.exit(1)
    try:
        result = subprocess.run(cmd, capture_output=True, text=True,
                                timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as hang:
        outs = [out.decode(errors="replace") if isinstance(out, bytes)
                else out or "" for out in (hang.stdout, hang.stderr)]
        fail("HUNG (no end in %d s): %s\n%s" %
             (timeout, " ".join(cmd), "\n".join(outs)))
    if result.returncode != 0:
        fail("FAILED (exit %d): %s\n%s" % (result.returncode, " ".join(cmd),
                                            result.stdout + result.stderr))
    return result


def ranks(mesh):
    n = 1
    for part in mesh.split("x"):
        n *= int(part)
    return n


def train(shardc, model, out_dir, tag, strategy, mesh, steps, extra=(),
          run_args=(), env=None):
    """Builds and runs one configuration (the run in `env`, None for this
    process's); returns (export path, log)."""
    exe = os.path.join(out_dir, tag)
    run([shardc, "build", model, "--strategy", strategy, "--mesh", mesh,
         "--quiet", "-o", exe] + list(extra))
    export = exe + ".safetensors"
    log = exe + ".jsonl"
    cmd = [exe, "--steps", str(steps), "--export", export, "--log-json", log,
           "--quiet"] + list(run_args)
    n = ranks(mesh)
    if n > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x",
               "OPENBLAS_NUM_THREADS=1", "-np", str(n)] + cmd
    run(cmd, env=env)
    return export, read_log(log)
