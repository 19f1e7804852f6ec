# bench/allocators.sh - allocator resolution shared by the bench scripts
# (scaling.sh, servers.sh); sourced, not run.  The caller defines die() and
# note() and sets HAKMEM_LIB (the hakmem preload library) first.
#
#   resolve_allocators LIST   fills alloc_names[] and alloc_libs[] (the
#                             LD_PRELOAD value; "" for glibc) and nalloc
#
# LIST entries: hakmem glibc mimalloc jemalloc tcmalloc, or NAME=/path/lib.so.
# "hakmem" missing is an error; missing peers are skipped with a note.  Each
# library is checked to really load (ld.so only warns when a preload fails and
# carries on with glibc, which would silently measure the wrong allocator).

find_lib() {     # find_lib soname...: first existing path
  local dirs=("/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib) d n
  for n in "$@"; do for d in "${dirs[@]}"; do
    [[ -e $d/$n ]] && { echo "$d/$n"; return 0; }
  done; done
  return 1
}

# Succeeds if LD_PRELOAD=$1 really maps the library.
preload_works() {
  local real maps
  real=$(readlink -f "$1")
  maps=$(LD_PRELOAD=$1 cat /proc/self/maps 2>/dev/null) || return 1
  grep -qF "$real" <<<"$maps"
}

resolve_allocators() {
  local a name lib
  alloc_names=()
  alloc_libs=()
  for a in $1; do
    name=$a lib=
    case "$a" in
      *=*) name=${a%%=*}; lib=${a#*=}; [[ $lib == /* ]] || lib=$PWD/$lib ;;
      hakmem) lib=$HAKMEM_LIB ;;
      glibc) lib= ;;
      mimalloc) lib=$(find_lib libmimalloc.so.2 libmimalloc.so) || { note "mimalloc not installed: skipped"; continue; } ;;
      jemalloc) lib=$(find_lib libjemalloc.so.2 libjemalloc.so) || { note "jemalloc not installed: skipped"; continue; } ;;
      tcmalloc) lib=$(find_lib libtcmalloc_minimal.so.4 libtcmalloc.so.4) || { note "tcmalloc not installed: skipped"; continue; } ;;
      *) die "unknown allocator '$a' (use NAME=/path/lib.so for others)" ;;
    esac
    if [[ -n $lib ]]; then
      if [[ ! -e $lib ]]; then
        [[ $name == hakmem ]] && die "hakmem library $lib not found: build it, set HAKMEM_LIB, or drop hakmem from ALLOCATORS"
        die "$name: $lib not found"
      fi
      preload_works "$lib" || die "$name: LD_PRELOAD=$lib does not load (see: LD_PRELOAD=$lib true)"
    fi
    alloc_names+=("$name")
    alloc_libs+=("$lib")
  done
  [[ ${#alloc_names[@]} -ge 1 ]] || die "no allocator to run"
  nalloc=${#alloc_names[@]}
}
