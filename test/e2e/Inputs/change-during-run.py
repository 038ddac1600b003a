"""Runs a training executable on a token file it makes, until the first
step is logged, then changes the file as a process rewriting the data
during a run would: `shrink` cuts it to its header (the run reads its
mapping past the new end), `rewrite` overwrites its tokens in place with
65535, the same size, above a GPT's vocabulary. Prints the run's exit
status and stderr.

usage: change-during-run.py OUT_DIR shrink|rewrite MPIRUN... EXE
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import lib  # noqa: E402


def main():
    out, change, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    tokens = os.path.join(out, change + ".bin")
    log = os.path.join(out, change + ".jsonl")
    count = 100000
    lib.write_tokens(tokens, [t % 256 for t in range(count)])
    run = lib.start_logging(command + ["--data", tokens], log)
    if change == "shrink":
        os.truncate(tokens, 1024)
    else:
        with open(tokens, "r+b") as f:
            f.seek(1024)
            f.write(b"\xff\xff" * count)
    try:
        _, errors = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run.kill()
        _, errors = run.communicate()
        print("still running 60 s after the file was changed")
    print("exit", run.returncode)
    sys.stdout.write(errors)


if __name__ == "__main__":
    main()
