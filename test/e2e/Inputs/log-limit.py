"""Runs a one-rank training executable until it has logged a step, stops
it (each line is one write, so the log then ends in a whole line), caps its
file size (RLIMIT_FSIZE; the runtime ignores SIGXFSZ) 100 bytes past the
log's length, less than a line, and lets it go on: its next line is cut
short, as a full disk would cut it. Prints the run's first stderr line
after that (the --log-json failure), whether the log then holds whole lines
only, each one JSON, and whether it ends where it ended at the stop (the
cut line cut off).

usage: log-limit.py EXE LOG
"""

import json
import os
import resource
import selectors
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import lib  # noqa: E402


def main():
    exe, log = sys.argv[1], sys.argv[2]
    run = lib.start_logging([exe], log)
    run.send_signal(signal.SIGSTOP)
    time.sleep(0.2)
    stopped = os.path.getsize(log)
    cap = stopped + 100
    resource.prlimit(run.pid, resource.RLIMIT_FSIZE, (cap, cap))
    run.send_signal(signal.SIGCONT)
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
    print("whole lines:", whole)
    print("ends at the stop:", len(text.encode()) == stopped,
          "(%d bytes, %d at the stop)" % (len(text.encode()), stopped))


if __name__ == "__main__":
    main()
