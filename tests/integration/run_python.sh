#!/usr/bin/env bash
# A threaded Python workload prints the same with and without hakmem.
# Both runs use PYTHONMALLOC=malloc (below); stdout must be identical, stderr
# under hakmem must hold nothing but hakmem's statistics line.
#   run_python.sh /path/to/libhakmem.so /path/to/python3 python_workload.py
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
py=$2
script=$3
command -v "$py" >/dev/null 2>&1 || hk_skip "python interpreter '$py' not found"
# Run the interpreter itself, not a wrapper script (pyenv's shim is bash
# running more processes), so the statistics line is python's own.
py=$(env -u LD_PRELOAD "$py" -c 'import sys; print(sys.executable)') ||
  hk_fail "cannot run $2"
# Hash randomisation must not make the two runs differ.  PYTHONMALLOC=malloc:
# every object goes through malloc/free instead of pymalloc's own arenas, so
# hakmem serves all of Python's allocations, not only the large ones.
export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 PYTHONMALLOC=malloc

hk_plain "$py" "$script" > "$HK_TMP/ref.out" 2> "$HK_TMP/ref.err" ||
  { cat "$HK_TMP/ref.err" >&2; hk_fail "reference run (no preload) failed"; }
rc=0
hk_preload "$py" "$script" > "$HK_TMP/hak.out" 2> "$HK_TMP/hak.err" || rc=$?
if (( rc != 0 )); then
  hk_strip_stats "$HK_TMP/hak.err" | tail -n 30 >&2
  hk_fail "python under hakmem exited with status $rc"
fi
if ! cmp -s "$HK_TMP/ref.out" "$HK_TMP/hak.out"; then
  diff "$HK_TMP/ref.out" "$HK_TMP/hak.out" | head -n 40 >&2
  hk_fail "python's output differs under hakmem"
fi
extra=$(hk_strip_stats "$HK_TMP/hak.err")
[[ -z "$extra" ]] || { echo "$extra" >&2; hk_fail "python wrote to stderr under hakmem"; }
hk_note "stdout identical ($(wc -l < "$HK_TMP/hak.out") lines)"
hk_check_stats "$HK_TMP/hak.err" 1000000 "python3"
echo "PASS"
