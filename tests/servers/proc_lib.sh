# Stopping a background process for good; sourced by tests/servers/server_lib.sh
# and bench/servers.sh, not run.
#
#   proc_alive PID   the process runs (an exited child stays a zombie until it
#                    is waited for, and kill -0 succeeds on a zombie)
#   proc_kill PID    SIGTERM; SIGKILL if it still runs 10 s later; then reap it
#                    (its exit status is not kept)

proc_alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st && ${st:0:1} != Z ]]
}

proc_kill() {
  local i
  kill -TERM "$1" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    proc_alive "$1" || break
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
