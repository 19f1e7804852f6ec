#!/usr/bin/env bash
# Check that includes and calls in src/ run one way, down the layers that
# src/README.md lists, and print the graph.
#
#   scripts/layers.sh [BUILD_DIR]
#
# The layers are the rows of src/README.md's table whose first cell is a
# number (0 at the bottom); the second cell names the row's modules (a
# module is NAME.c with its NAME.h; "alloc+free" is one module of two
# files).  A file may include, and its object may call, only modules of a
# lower layer, or its own module.
#   includes  #include "..." lines of every file in src/;
#   calls     the objects' symbols (nm): an undefined symbol of one object
#             that another object defines is a call (or a use of its data)
#             from the first module to the second.  Inline functions count
#             where they are inlined.  Needs a build: BUILD_DIR (default
#             build) with the hakmem_core and hakmem_api objects.
# Prints each module's edges with their layers; exit 1 if an edge goes up
# or sideways, or if a file of src/ is in no layer.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
src=$root/src
readme=$src/README.md
[[ -f $readme ]] || { echo "layers.sh: $readme is missing" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# module layer: "| 3 | block | ..." rows; a cell's words are modules.
awk -F'|' '$2 ~ /^ *[0-9]+ *$/ { gsub(/`/, "", $3); n = split($3, m, " "); for (i = 1; i <= n; i++) print m[i], $2 + 0 }' \
  "$readme" >"$tmp/layers"
# The edges "FROM-FILE TO-FILE KIND DETAIL": includes, then calls.
: >"$tmp/edges"
for f in "$src"/*.c "$src"/*.h; do
  name=$(basename "$f")
  sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
    if [[ -f $src/$inc ]]; then echo "$name $inc include $inc"; fi   # hakmem.h: not a module
  done >>"$tmp/edges"
  echo "$name" >>"$tmp/files"
done

objs=()
for d in hakmem_core hakmem_api; do
  for o in "$build/CMakeFiles/$d.dir/src/"*.o; do [[ -e $o ]] && objs+=("$o"); done
done
if [[ ${#objs[@]} -eq 0 ]]; then
  echo "layers.sh: no objects under $build/CMakeFiles/hakmem_{core,api}.dir: build first" >&2
  exit 2
fi
for o in "${objs[@]}"; do
  b=$(basename "$o" .o)
  nm "$o" | awk -v f="$b" '$1 == "U" { print f, "U", $2 } NF == 3 && $2 ~ /^[TDBRV]$/ { print f, "D", $3 }'
done | awk '$2 == "D" { def[$3] = $1 } $2 == "U" { use[++n] = $1 " " $3 }
     END { for (i = 1; i <= n; i++) { split(use[i], a, " "); if (a[2] in def) print a[1], def[a[2]], "call", a[2] } }' |
  sort -u >>"$tmp/edges"

# Map files to modules and layers; print each module's uses; flag the
# edges that do not go down, and files in no layer.
awk -v layers="$tmp/layers" -v files="$tmp/files" '
  function base(f) { sub(/\.[ch]$/, "", f); return f }
  BEGIN {
    while ((getline line < layers) > 0) {
      split(line, w, " "); lay[w[1]] = w[2]; order[++nm] = w[1]
      k = split(w[1], parts, "+"); for (i = 1; i <= k; i++) mod[parts[i]] = w[1]
    }
    while ((getline f < files) > 0)
      if (!(base(f) in mod)) { printf "layers.sh: src/%s is in no layer of src/README.md\n", f > "/dev/stderr"; bad = 1 }
  }
  {
    a = base($1); b = base($2)
    if (!(a in mod) || !(b in mod)) next
    m = mod[a]; t = mod[b]
    if (m == t) next
    if (!((m, t) in seen)) { seen[m, t] = 1; uses[m] = uses[m] " " t "(" lay[t] ")" }
    if (lay[t] >= lay[m]) {
      printf "layers.sh: %s from %s (layer %d) to %s (layer %d): %s -> %s\n", $3, m, lay[m], t, lay[t], $1, $4 > "/dev/stderr"
      bad = 1
    }
  }
  END {
    for (l = 99; l >= 0; l--) for (i = 1; i <= nm; i++) if (lay[order[i]] == l)
      printf "%2d %-24s ->%s\n", l, order[i], (order[i] in uses) ? uses[order[i]] : " -"
    if (bad) exit 1
    print "layers: every include and call runs down the layers"
  }' "$tmp/edges"
