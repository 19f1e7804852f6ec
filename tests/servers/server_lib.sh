# Shared helpers of the server tests; sourced after tests/integration/lib.sh.
#
#   srv_start NAME READY_CMD SERVER_CMD...
#        pick a free loopback port ($SRV_PORT; the string @PORT@ in
#        SERVER_CMD is replaced by it), start the server in the background
#        ($SRV_PID, stderr in $HK_TMP/NAME.err, stdout in $HK_TMP/NAME.out)
#        and run READY_CMD (with @PORT@ replaced) until it succeeds.  If the
#        server exits meanwhile (e.g. the port was taken between the choice and
#        its bind) it is started again on another port, up to 5 times.
#   srv_stop  SIGTERM, wait for the exit; $SRV_RC is its exit status
#   srv_mem   print "rss_kb hwm_kb" of the running server (/proc/PID/status)
#
# The server is stopped (SIGTERM, then SIGKILL after 10 s) when the script
# exits for any reason, so a failing check never leaves it running.
#
# Preloading: the hakmem library ($HK_LIB) is set as LD_PRELOAD of the server
# only, with HAKMEM_STATS=1.  To validate the harness itself,
# SERVER_TEST_PLAIN=1 runs the server without hakmem: with no preload, or
# with LD_PRELOAD=$SRV_PRELOAD if set (e.g. libc.so.6 for glibc's malloc in
# redis-server, which is linked with jemalloc); the checks of hakmem's
# statistics line then become notices.

SRV_PID=
SRV_RC=
SRV_PORT=
HK_PY=${HK_PY:-python3}

source "$(dirname "${BASH_SOURCE[0]}")/proc_lib.sh"   # proc_alive, proc_kill

srv_cleanup() {
  if [[ -n $SRV_PID ]] && proc_alive "$SRV_PID"; then
    proc_kill "$SRV_PID"
  fi
  rm -rf "$HK_TMP"
}
trap srv_cleanup EXIT

if [[ -n "${SERVER_TEST_PLAIN:-}" ]]; then
  if [[ -n "${SRV_PRELOAD:-}" ]]; then
    SRV_ENV=(env -u HAKMEM_STATS LD_PRELOAD="$SRV_PRELOAD")
  else
    SRV_ENV=(env -u LD_PRELOAD -u HAKMEM_STATS)
  fi
  export HAKMEM_TEST_NO_STATS=1
else
  SRV_ENV=(env LD_PRELOAD="$HK_LIB" HAKMEM_STATS=1)
fi

# srv_freeport: a port free on 127.0.0.1 now (the kernel's choice for port 0).
srv_freeport() {
  "$HK_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

srv_start() {
  local name=$1 ready=$2
  shift 2
  local attempt i cmd ready_cmd
  for ((attempt = 1; attempt <= 5; attempt++)); do
    SRV_PORT=$(srv_freeport) || hk_fail "cannot pick a free port"
    cmd=("${@//@PORT@/$SRV_PORT}")
    ready_cmd=${ready//@PORT@/$SRV_PORT}
    "${SRV_ENV[@]}" "${cmd[@]}" > "$HK_TMP/$name.out" 2> "$HK_TMP/$name.err" &
    SRV_PID=$!
    # Up to 30 s for the server to answer (a loaded machine is slow to start
    # a preloaded process); the readiness command itself polls.
    for ((i = 0; i < 150; i++)); do
      proc_alive "$SRV_PID" || break
      if eval "$ready_cmd" >/dev/null 2>&1; then
        hk_note "$name: pid $SRV_PID on 127.0.0.1:$SRV_PORT"
        return 0
      fi
    done
    if proc_alive "$SRV_PID"; then
      hk_fail "$name (pid $SRV_PID) does not answer on port $SRV_PORT"
    fi
    wait "$SRV_PID" 2>/dev/null || true
    SRV_PID=
    echo "   $name exited at start (attempt $attempt, port $SRV_PORT):" >&2
    tail -n 5 "$HK_TMP/$name.err" "$HK_TMP/$name.out" >&2
  done
  hk_fail "$name did not start"
}

srv_mem() {
  awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r, h }' "/proc/$SRV_PID/status"
}

srv_stop() {
  local i
  kill -TERM "$SRV_PID"
  for ((i = 0; i < 300; i++)); do      # up to 30 s to shut down
    proc_alive "$SRV_PID" || break
    sleep 0.1
  done
  proc_alive "$SRV_PID" && hk_fail "server (pid $SRV_PID) still running 30 s after SIGTERM"
  SRV_RC=0
  wait "$SRV_PID" || SRV_RC=$?
  SRV_PID=
}

# srv_stat ERRFILE FIELD: FIELD= of the last "hakmem:" line ("" if none).
srv_stat() {
  grep -E '^hakmem:' "$1" | tail -n 1 | grep -oE "(^|[[:space:]])$2=[0-9]+" | sed 's/.*=//'
}
