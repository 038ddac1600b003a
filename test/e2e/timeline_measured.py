"""The ledger's predicted step (its timeline) against a measured one.

usage: timeline_measured.py LEDGER.json MEASURED_MS TOLERANCE LABEL

Prints one row, ok where the prediction is within TOLERANCE (relative) of
MEASURED_MS, and exits 1 otherwise.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402


def main():
    path, measured, tolerance, label = sys.argv[1:5]
    measured, tolerance = float(measured), float(tolerance)
    predicted = json.load(open(path))["timeline"]["step_ms"]
    check = lib.Checks()
    check(abs(predicted - measured) <= tolerance * measured,
          "%s: predicted %.1f ms, measured %.1f" % (label, predicted,
                                                    measured))
    sys.exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
