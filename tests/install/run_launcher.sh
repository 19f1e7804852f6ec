#!/usr/bin/env bash
# The launcher: hakmem [--stats[=N]] [--] COMMAND [ARGS...]
#   run_launcher.sh LAUNCHER LIBRARY
# LIBRARY is the path the launcher must preload (build/libhakmem.so, or the
# installed libhakmem.so.0).  Every command run here exits by itself.
# shellcheck disable=SC2016  # single-quoted $VARs are the child shell's
set -uo pipefail
L=$1 lib=$2
fails=0
fail() { echo "run_launcher: FAIL: $*" >&2; fails=$((fails + 1)); }
# expect_status WANT CMD...: CMD's exit status is WANT (stdout/stderr kept in $out/$err).
out='' err=''
expect_status() {
  local want=$1; shift
  local errf
  errf=$(mktemp)
  out=$("$@" 2> "$errf"); local got=$?
  err=$(cat "$errf"); rm -f "$errf"
  if [[ $got != "$want" ]]; then
    fail "'$*' exited $got, want $want (stderr: ${err:0:300})"
    return 1
  fi
}

[[ -x $L ]] || { echo "run_launcher: FAIL: $L is not executable" >&2; exit 1; }
grep -q "^HAKMEM_LIB='$lib'\$" "$L" || fail "$L does not preload $lib"

# The environment the command gets: LD_PRELOAD with hakmem first.
if expect_status 0 "$L" -- sh -c 'printf %s "$LD_PRELOAD"'; then
  [[ $out == "$lib" ]] || fail "LD_PRELOAD is '$out', want '$lib'"
fi
other=/usr/lib/x86_64-linux-gnu/libm.so.6
[[ -f $other ]] || other=$lib   # any library that loads
if LD_PRELOAD=$other expect_status 0 "$L" -- sh -c 'printf %s "$LD_PRELOAD"'; then
  [[ $out == "$lib:$other" ]] || fail "existing LD_PRELOAD: got '$out', want '$lib:$other'"
fi
# Arguments pass through untouched, options after -- included.
if expect_status 0 "$L" -- printf '%s|' 'a b' '' --stats -x; then
  [[ $out == 'a b||--stats|-x|' ]] ||
    fail "arguments: got '$out'"
fi
if expect_status 0 "$L" printf '%s|' x; then
  [[ $out == 'x|' ]] || fail "command without --: got '$out'"
fi

# Exit status and signals pass through; exec: the command has the launcher's pid.
expect_status 7 "$L" -- sh -c 'exit 7'
expect_status 143 "$L" -- sh -c 'kill -TERM $$'      # SIGTERM: 128 + 15
expect_status 137 "$L" -- sh -c 'kill -KILL $$'      # SIGKILL: 128 + 9
if expect_status 0 sh -c 'echo $$; exec "$0" -- sh -c "echo \$\$"' "$L"; then
  { read -r a; read -r b; } <<< "$out"
  [[ -n $a && $a == "$b" ]] || fail "the command does not replace the launcher (pids '$a' '$b')"
fi

# --stats: hakmem's counters on stderr at exit, from a real allocating program.
if expect_status 0 "$L" --stats -- ls -l /; then
  line=$(grep '^hakmem: ' <<< "$err" | head -1)
  [[ $line =~ (^hakmem:| )allocs=[1-9][0-9]* ]] || fail "--stats: no 'hakmem: ... allocs=N' line (stderr: ${err:0:300})"
  echo "--stats: $line" | cut -c1-120
fi
if expect_status 0 "$L" --stats -- sh -c 'printf %s "$HAKMEM_STATS"' 2>/dev/null; then
  [[ $out == 1 ]] ||
    fail "--stats: HAKMEM_STATS='$out'"
fi
if expect_status 0 "$L" --stats=2 -- sh -c 'printf %s "$HAKMEM_STATS"'; then
  [[ $out == 2 ]] ||
    fail "--stats=2: HAKMEM_STATS='$out'"
fi
if HAKMEM_STATS=1 expect_status 0 "$L" -- sh -c 'printf %s "$HAKMEM_STATS"'; then
  [[ $out == 1 ]] ||
    fail "without --stats the environment's HAKMEM_STATS is kept: '$out'"
fi
# Without --stats (and HAKMEM_STATS unset) no counters.
if expect_status 0 env -u HAKMEM_STATS "$L" -- ls /; then
  [[ $err != *hakmem:* ]] ||
    fail "counters printed without --stats: ${err:0:200}"
fi

# --help, --version.
if expect_status 0 "$L" --help; then
  [[ $out == Usage:* && $out == *--stats* ]] || fail "--help: '$out'"
fi
if expect_status 0 "$L" --version; then
  [[ $out =~ ^hakmem\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version: '$out'"
fi

# Usage errors exit 2 with a message; a missing command 127, as shells do.
for bad in "" "--" "--bogus -- true" "-x true" "--stats=7 -- true" "--stats"; do
  # shellcheck disable=SC2086  # the cases are word lists
  if expect_status 2 "$L" $bad; then
    [[ $err == *--help* ]] || fail "usage error '$bad': no message"
  fi
done
if expect_status 127 "$L" -- hakmem-no-such-command-xyz; then
  [[ $err == *not\ found* ]] ||
    fail "missing command: '$err'"
fi
expect_status 127 "$L" -- ./no/such/file
plain=$(mktemp)   # exists, not executable
expect_status 126 "$L" -- "$plain"
rm -f "$plain"
expect_status 126 "$L" -- /

if [[ $fails -ne 0 ]]; then
  echo "run_launcher: $fails failure(s)" >&2
  exit 1
fi
echo "run_launcher: ok ($L)"
