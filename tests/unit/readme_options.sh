#!/usr/bin/env bash
# The options table of the documentation (docs/tuning.md) is the one the
# library prints with HAKMEM_VERBOSE=2 (from the option table of
# src/options.c): same names, defaults, ranges and meanings.
#   readme_options.sh /path/to/unit_options /path/to/docs/tuning.md
set -euo pipefail
prog=$1 readme=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
env -u HAKMEM_STATS HAKMEM_VERBOSE=2 "$prog" child 2> "$tmp/lib" >/dev/null
grep '^|' "$tmp/lib" > "$tmp/want" || true
# The table of the section "## Options (environment)".
awk '/^## /{ in_sec = ($0 ~ /^## Options/) } in_sec && /^\|/' "$readme" > "$tmp/have"
[[ -s "$tmp/want" ]] || { echo "FAIL: HAKMEM_VERBOSE=2 printed no table" >&2; exit 1; }
if ! diff -u "$tmp/have" "$tmp/want"; then
  echo "FAIL: $readme's options table differs from the library's (- document, + library);" >&2
  echo "      regenerate it: HAKMEM_VERBOSE=2 build/tests/unit/unit_options child" >&2
  exit 1
fi
echo "PASS: $readme's options table matches the library ($(( $(wc -l < "$tmp/want") - 2 )) options)"
