#!/usr/bin/env bash
# Show that the stress suite catches real allocator bugs.
#
#   stress/prove_catches.sh [stress/inject/NN-name.patch ...]   (default: all)
#
# For each patch in stress/inject/ (each injects one realistic concurrency or
# bookkeeping bug into src/), this script copies the working tree to a
# temporary directory, applies the patch, builds the kind of build the patch
# names (release, or tsan = -DHAKMEM_TSAN=ON), runs the stress programs the
# patch names, and reports
#   PASS  the suite failed on the patched allocator (the bug was caught),
#   FAIL  the suite passed on the patched allocator (the bug went unnoticed).
# The same programs also run on an unpatched copy (the baseline, once per build
# kind), so a detection means "fails where the unpatched allocator passes":
#   release  a patched run exits non-zero while every baseline run exits 0;
#   tsan     a patched run shows a ThreadSanitizer report signature (report
#            kind + innermost function of each access) that no baseline run
#            shows, or fails its own checks while the baseline passes.
# A baseline failure makes the patch's verdict INCONCLUSIVE (nothing proven).
#
# Patch header (git apply ignores text before the first "diff --git"):
#   Inject: <description, may repeat>
#   Build:  release | tsan
#   Run:    <stress program> <arguments>       (one or more)
#   Expect: <which check should fire>
#
# A demonstration tool, not a ctest.  Env: JOBS (default 2), KEEP_TMP=1 keeps
# the temporary trees and logs.  Exit 0 only if every patch is PASS.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${JOBS:-2}
# The stress programs check hakmem's block counts, which it keeps only with
# HAKMEM_STATS=1 (the accounting patch is caught by that check).
export HAKMEM_STATS=1
supp=$repo/tsan/suppressions.txt
work=$(mktemp -d /tmp/hakmem-prove.XXXXXX)
if [[ "${KEEP_TMP:-0}" == 1 ]]; then
  echo "prove_catches: keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi

if (( $# )); then patches=("$@"); else patches=("$repo"/stress/inject/*.patch); fi
(( ${#patches[@]} )) && [[ -f "${patches[0]}" ]] || { echo "prove_catches: no patches" >&2; exit 2; }

header() { sed -n "s/^$2:[[:space:]]*//p" "$1"; }

copy_tree() {  # copy_tree DEST: the working tree without .git and build dirs
  mkdir -p "$1"
  tar -C "$repo" --exclude=./.git --exclude=./build --exclude='./build-*' -cf - . | tar -C "$1" -xf -
}

build_tree() {  # build_tree TREE KIND LOG PROGRAMS...
  local tree=$1 kind=$2 log=$3
  shift 3
  local flags=(-DCMAKE_BUILD_TYPE=Release)
  [[ "$kind" == tsan ]] && flags=(-DHAKMEM_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  cmake -S "$tree" -B "$tree/build-$kind" "${flags[@]}" > "$log" 2>&1 &&
    cmake --build "$tree/build-$kind" -j"$jobs" --target "$@" >> "$log" 2>&1
}

# run_one KIND BINDIR OUTPREFIX PROGRAM ARGS... -> exit code; output in OUTPREFIX.out,
# TSan reports in OUTPREFIX.tsan.<pid>
run_one() {
  local kind=$1 bindir=$2 out=$3 prog=$4
  shift 4
  local secs=10 a prev=
  for a in "$@"; do [[ "$prev" == --seconds ]] && secs=${a%.*}; prev=$a; done
  if [[ "$kind" == tsan ]]; then
    local opts="halt_on_error=0 exitcode=66 log_path=$out.tsan"
    [[ -f "$supp" ]] && opts="$opts suppressions=$supp"
    TSAN_OPTIONS="$opts" timeout $(( secs * 10 + 180 )) "$bindir/stress/$prog" "$@" > "$out.out" 2>&1
  else
    timeout $(( secs * 4 + 120 )) "$bindir/stress/$prog" "$@" > "$out.out" 2>&1
  fi
}

# TSan report signatures of the files OUTPREFIX.tsan.*: "kind: f1 | f2" with
# the innermost frame of the (first two) access stacks.
signatures() {
  local f
  for f in "$1".tsan.*; do
    [[ -f "$f" ]] || continue
    awk '
      /WARNING: ThreadSanitizer:/ { kind = $0; sub(/.*ThreadSanitizer: /, "", kind); sub(/ \(pid=.*/, "", kind); n = 0; f1 = ""; f2 = ""; on = 1; next }
      on && /^ +#0 / { n++; if (n == 1) f1 = $2; else if (n == 2) f2 = $2 }
      on && /^SUMMARY/ { if (f2 != "" && f2 < f1) { t = f1; f1 = f2; f2 = t }
                         print kind ": " f1 (f2 != "" ? " | " f2 : ""); on = 0 }
    ' "$f"
  done | sort -u
}

# ---------------------------------------------------------------- patches
declare -A kind_of runs_of
kinds=()
for p in "${patches[@]}"; do
  k=$(header "$p" Build | head -n1)
  [[ "$k" == release || "$k" == tsan ]] || { echo "prove_catches: $p: Build must be release or tsan" >&2; exit 2; }
  kind_of[$p]=$k
  runs_of[$p]=$(header "$p" Run)
  [[ -n "${runs_of[$p]}" ]] || { echo "prove_catches: $p: no Run: line" >&2; exit 2; }
  [[ " ${kinds[*]} " == *" $k "* ]] || kinds+=("$k")
done

# ---------------------------------------------------------------- baselines
declare -A base_ok base_sigs
for k in "${kinds[@]}"; do
  echo "== baseline ($k): unpatched tree"
  tree=$work/base-$k
  copy_tree "$tree"
  progs=$(for p in "${patches[@]}"; do [[ ${kind_of[$p]} == "$k" ]] && awk '{print $1}' <<<"${runs_of[$p]}"; done | sort -u)
  # shellcheck disable=SC2086
  if ! build_tree "$tree" "$k" "$work/base-$k.build.log" $progs; then
    tail -n 30 "$work/base-$k.build.log"
    echo "prove_catches: baseline $k build failed" >&2
    exit 2
  fi
  base_ok[$k]=1
  : > "$work/base-$k.sigs"
  i=0
  while read -r line; do
    [[ -n "$line" ]] || continue
    i=$((i + 1))
    # shellcheck disable=SC2086
    run_one "$k" "$tree/build-$k" "$work/base-$k.run$i" $line
    rc=$?
    s=$(signatures "$work/base-$k.run$i")
    printf '   %-48s exit %3d  %s\n' "$line" "$rc" "$(grep -oE ' ops=[0-9]+' "$work/base-$k.run$i.out" | head -n1)"
    [[ -n "$s" ]] && sed 's/^/      tsan: /' <<<"$s"
    echo "$s" >> "$work/base-$k.sigs"
    if (( rc != 0 )) && ! [[ "$k" == tsan && $rc == 66 ]]; then
      base_ok[$k]=0
      grep -m3 -E '^FAIL' "$work/base-$k.run$i.out" | sed 's/^/      /'
    fi
  done < <(for p in "${patches[@]}"; do [[ ${kind_of[$p]} == "$k" ]] && echo "${runs_of[$p]}"; done | sort -u)
  sort -u -o "$work/base-$k.sigs" "$work/base-$k.sigs"
  sed -i '/^$/d' "$work/base-$k.sigs"
done

# ---------------------------------------------------------------- patched runs
declare -A verdict
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  k=${kind_of[$p]}
  echo "== $name ($k)"
  header "$p" Inject | sed 's/^/   | /'
  echo "   expect: $(header "$p" Expect)"
  tree=$work/$name
  copy_tree "$tree"
  if ! (cd "$tree" && git apply "$p") > "$work/$name.apply.log" 2>&1; then
    sed 's/^/   /' "$work/$name.apply.log"
    echo "   => ERROR (patch does not apply to the current src/)"
    verdict[$name]=ERROR
    continue
  fi
  progs=$(awk '{print $1}' <<<"${runs_of[$p]}" | sort -u)
  # shellcheck disable=SC2086
  if ! build_tree "$tree" "$k" "$work/$name.build.log" $progs; then
    tail -n 20 "$work/$name.build.log" | sed 's/^/   /'
    echo "   => ERROR (patched tree does not build)"
    verdict[$name]=ERROR
    continue
  fi
  detected=0
  i=0
  while read -r line; do
    [[ -n "$line" ]] || continue
    i=$((i + 1))
    out=$work/$name.run$i
    # shellcheck disable=SC2086
    run_one "$k" "$tree/build-$k" "$out" $line
    rc=$?
    printf '   %-48s exit %3d  %s\n' "$line" "$rc" "$(grep -oE ' ops=[0-9]+' "$out.out" | head -n1)"
    if [[ "$k" == tsan ]]; then
      new=$(comm -13 "$work/base-$k.sigs" <(signatures "$out"))
      total=$(cat "$out".tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer')
      if [[ -n "$new" ]]; then
        detected=1
        echo "      $total TSan reports; signatures absent from the baseline:"
        sed 's/^/        /' <<<"$new" | head -n 8
      else
        echo "      $total TSan reports, none new"
      fi
      if (( rc != 0 && rc != 66 )); then
        detected=1
        grep -m3 -E '^FAIL' "$out.out" | sed 's/^/      /'
      fi
    else
      if (( rc != 0 )); then
        detected=1
        { grep -m2 -E '^FAIL' "$out.out" || tail -n 3 "$out.out"; } | cut -c1-400 | sed 's/^/      /'
      fi
    fi
  done <<<"${runs_of[$p]}"
  if [[ ${base_ok[$k]} != 1 ]]; then
    verdict[$name]=INCONCLUSIVE
    echo "   => INCONCLUSIVE (the unpatched baseline fails too)"
  elif (( detected )); then
    verdict[$name]=PASS
    echo "   => PASS (the suite caught the injected bug)"
  else
    verdict[$name]=FAIL
    echo "   => FAIL (the suite did not notice the injected bug)"
  fi
done

echo "== summary"
rc=0
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  printf '   %-34s %-8s %s\n' "$name" "${kind_of[$p]}" "${verdict[$name]}"
  [[ ${verdict[$name]} == PASS ]] || rc=1
done
exit $rc
