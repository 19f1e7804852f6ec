# scripts/allocators.sh - sourced (bash): where the allocators that hakmem is
# compared with live, and whether LD_PRELOAD really loads one.  Used by
# bench/scaling.sh and tests/misuse_suite/run.sh.
#
#   alloc_resolve SPEC HAKMEM_LIB
#     SPEC: hakmem | glibc | mimalloc | jemalloc | tcmalloc | NAME=/path/lib.so
#     Sets ALLOC_NAME and ALLOC_LIB (empty for glibc: nothing preloaded) and
#     returns 0; returns 1 if a peer allocator is not installed, 2 on an error
#     (unknown name, missing file, a library that does not preload), with the
#     reason in ALLOC_ERR.  HAKMEM_LIB is the library "hakmem" stands for.

# alloc_find_lib soname...: prints the first existing path.
alloc_find_lib() {
  local dirs=("/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib) d n
  for n in "$@"; do for d in "${dirs[@]}"; do
    [[ -e $d/$n ]] && { echo "$d/$n"; return 0; }
  done; done
  return 1
}

# alloc_preload_works LIB: true if LD_PRELOAD=LIB really maps the library
# (ld.so only warns and carries on with glibc when a preload fails, which
# would silently test the wrong allocator).
alloc_preload_works() {
  local real maps
  real=$(readlink -f "$1")
  maps=$(LD_PRELOAD=$1 cat /proc/self/maps 2>/dev/null) || return 1
  grep -qF "$real" <<<"$maps"
}

alloc_resolve() {
  local spec=$1 hakmem_lib=$2
  ALLOC_NAME=$spec ALLOC_LIB= ALLOC_ERR=
  case "$spec" in
    *=*) ALLOC_NAME=${spec%%=*}; ALLOC_LIB=${spec#*=}
         [[ $ALLOC_LIB == /* ]] || ALLOC_LIB=$PWD/$ALLOC_LIB ;;
    hakmem) ALLOC_LIB=$hakmem_lib ;;
    glibc) return 0 ;;
    mimalloc) ALLOC_LIB=$(alloc_find_lib libmimalloc.so.2 libmimalloc.so) || { ALLOC_ERR="mimalloc not installed"; return 1; } ;;
    jemalloc) ALLOC_LIB=$(alloc_find_lib libjemalloc.so.2 libjemalloc.so) || { ALLOC_ERR="jemalloc not installed"; return 1; } ;;
    tcmalloc) ALLOC_LIB=$(alloc_find_lib libtcmalloc_minimal.so.4 libtcmalloc.so.4) || { ALLOC_ERR="tcmalloc not installed"; return 1; } ;;
    *) ALLOC_ERR="unknown allocator '$spec' (use NAME=/path/lib.so for others)"; return 2 ;;
  esac
  if [[ ! -e $ALLOC_LIB ]]; then
    if [[ $ALLOC_NAME == hakmem ]]; then
      ALLOC_ERR="hakmem library $ALLOC_LIB not found: build it (cmake --build build)"
    else
      ALLOC_ERR="$ALLOC_NAME: $ALLOC_LIB not found"
    fi
    return 2
  fi
  alloc_preload_works "$ALLOC_LIB" || { ALLOC_ERR="$ALLOC_NAME: LD_PRELOAD=$ALLOC_LIB does not load (see: LD_PRELOAD=$ALLOC_LIB true)"; return 2; }
  return 0
}
