#!/usr/bin/env bash
# Install the Debian packages hakmem needs, if any is missing.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --bench    also the allocators compared in bench/, gnuplot,
#                                      valgrind and time (bench/insn.sh, bench/cost.sh)
# As root it runs apt-get; otherwise it prints the exact command to run.
set -euo pipefail

# memcached, redis-server, redis-tools: the server tests (tests/servers/).
# On a host with systemd, installing them starts their system services
# (ports 11211 and 6379); the tests neither use nor disturb those: each test
# starts its own server on a free loopback port, with its own options and no
# configuration or data file of the system instance.
# pkgconf, dpkg-dev: the install and package tests (tests/install/).
pkgs=(cmake gcc g++ make binutils liburcu-dev libck-dev python3 procps pkgconf dpkg-dev
      pigz zstd xz-utils coreutils git memcached redis-server redis-tools
      clang libclang-rt-14-dev    # libFuzzer: scripts/fuzz.sh (run by test.sh)
      libunwind-dev google-perftools graphviz)   # the heap profiler: its unwinder; pprof for tests/prof/
if [[ "${1:-}" == "--bench" || "${1:-}" == "--all" ]]; then
  pkgs+=(libmimalloc-dev libjemalloc-dev libtcmalloc-minimal4 gnuplot-nox valgrind time
         librsvg2-bin)   # docs/profiler.png from google-pprof --svg
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
