"""Runs a training executable on a token file it makes, until the first
step is logged, then cuts the file to its header, as a process rewriting
the data during a run would: the run reads its mapping past the new end.
Prints the run's exit status and stderr.

usage: shrink-during-run.py OUT_DIR MPIRUN... EXE
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import lib  # noqa: E402


def main():
    out, command = sys.argv[1], sys.argv[2:]
    tokens = os.path.join(out, "shrink.bin")
    log = os.path.join(out, "shrink.jsonl")
    lib.write_tokens(tokens, [t % 256 for t in range(100000)])
    if os.path.exists(log):
        os.remove(log)
    run = subprocess.Popen(command + ["--quiet", "--steps", "100000000",
                                      "--data", tokens, "--log-json", log],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    deadline = time.time() + 60
    while time.time() < deadline and run.poll() is None and not (
            os.path.exists(log) and os.path.getsize(log) > 0):
        time.sleep(0.05)
    os.truncate(tokens, 1024)
    try:
        _, errors = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run.kill()
        _, errors = run.communicate()
        print("still running 60 s after the file was cut")
    print("exit", run.returncode)
    sys.stdout.write(errors)


if __name__ == "__main__":
    main()
