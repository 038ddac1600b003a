"""Runs a one-rank training executable until it has logged a step, then
caps its file size (RLIMIT_FSIZE, SIGXFSZ ignored) a little past the log's
length, so that a later line is cut short as a full disk would cut it.
Prints the run's first stderr line after that (the --log-json failure), and
whether the log then holds whole lines only, each one JSON.

usage: log-limit.py EXE LOG
"""

import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time


def main():
    exe, log = sys.argv[1], sys.argv[2]
    if os.path.exists(log):
        os.remove(log)
    # Ignored here and kept ignored across exec: a write past the cap
    # fails with EFBIG instead of killing the run.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    run = subprocess.Popen([exe, "--quiet", "--steps", "100000000",
                            "--log-json", log],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, restore_signals=False)
    deadline = time.time() + 60
    while time.time() < deadline and run.poll() is None and not (
            os.path.exists(log) and os.path.getsize(log) > 0):
        time.sleep(0.05)
    # Not a multiple of a line's length: the line that crosses it is cut.
    cap = os.path.getsize(log) + 1001
    resource.prlimit(run.pid, resource.RLIMIT_FSIZE, (cap, cap))
    selector = selectors.DefaultSelector()
    selector.register(run.stderr, selectors.EVENT_READ)
    said = "(nothing said in 60 s)"
    if selector.select(timeout=60):
        said = run.stderr.readline().rstrip("\n")
    run.kill()
    run.wait()
    print(said)
    text = open(log).read()
    lines = text.split("\n")
    whole = lines[-1] == "" and all(json.loads(line) for line in lines[:-1])
    print("whole lines:", whole, "(%d bytes, cap %d)" % (len(text), cap))


if __name__ == "__main__":
    main()
