#!/bin/sh
# Runs a command and reports how it ended on one line: its exit code, the
# bytes it wrote to stdout and the lines it wrote to stderr; then its stderr.
out=$(mktemp) || exit 1
err=$(mktemp) || exit 1
"$@" >"$out" 2>"$err"
code=$?
echo "exit=$code stdout=$(wc -c <"$out") stderr-lines=$(wc -l <"$err")"
cat "$err"
rm -f "$out" "$err"
