#!/usr/bin/env bash
# scripts/doc_links.sh [FILE.md ...] - every link and path in the documents
# exists: each markdown link target (relative to its file; web links and
# anchors aside) and each backticked repository path (relative to the root:
# `src/...`, `tests/...`, `bench/...`, ...).  Default: README.md,
# CONTRIBUTING.md, docs/*.md and bench/results/*.md.  Exit 1 on a miss.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
(( $# )) || set -- README.md CONTRIBUTING.md docs/*.md bench/results/*.md
bad=0 n=0
for f in "$@"; do
  d=$(dirname "$f")
  while IFS= read -r t; do
    t=${t%%#*}
    [[ -z $t || $t == *://* ]] && continue
    n=$((n + 1))
    [[ -e $d/$t ]] || { echo "$f: link $t: no such file" >&2; bad=1; }
  done < <(grep -o '](\([^)]*\))' "$f" | sed 's/^](//; s/)$//')
  while IFS= read -r t; do
    n=$((n + 1))
    [[ -e $t ]] || { echo "$f: path $t: no such file" >&2; bad=1; }
  done < <(grep -o '`[^` ]*/[^` ]*`' "$f" | tr -d '`' |
           grep -E '^(src|include|tests|stress|bench|scripts|tsan|cmake|docs)(/|$)' |
           sed 's/[(),:;.]*$//' | grep -v '[*<>$]' | sort -u)
done
(( bad )) || echo "doc_links: $n links and paths in $# files exist"
exit $bad
