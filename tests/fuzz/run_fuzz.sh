#!/bin/bash
# ctest's fuzz_<target>: runs the libFuzzer command given as arguments and prints its output. On
# a finding, the lines that say what it was (the failed check, the sanitizer's summary, where the
# input was written and, for a small input, its base64) are printed again at the very end: a
# crash is otherwise followed by its stack, the mutation history and the final stats, and a CI
# log shortened in the middle loses it.
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1
rc=$?
cat "$log"
if [ "$rc" -ne 0 ]; then
  echo "==== the finding (exit code $rc):"
  grep -E 'FUZZ_CHECK|ERROR: |SUMMARY: |written to|^Base64: ' "$log" | head -n 20
fi
exit "$rc"
