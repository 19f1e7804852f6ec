#!/usr/bin/env bash
# The preload library must define and export every entry point through which
# a program or glibc itself can allocate or free: if one is missing, glibc
# serves it and hakmem later sees glibc's blocks (or the reverse).  Also
# glibc's heap-inspection calls, which must report hakmem's heap, not glibc's
# empty arenas.
#   check_exports.sh /path/to/libhakmem.so
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$@"
hk_need nm

symbols=(malloc free calloc realloc reallocarray posix_memalign aligned_alloc
         memalign valloc pvalloc malloc_usable_size free_sized free_aligned_sized
         __libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign
         __posix_memalign
         malloc_trim malloc_stats malloc_info mallinfo mallinfo2)

nm -D --defined-only "$HK_LIB" > "$HK_TMP/dynsyms"
missing=()
for s in "${symbols[@]}"; do
  # Type T (text) or W/i (weak, indirect) - an exported function definition.
  if ! awk -v s="$s" '$3 == s || $3 ~ "^" s "@" { if ($2 ~ /^[TWi]$/) found = 1 } END { exit !found }' \
       "$HK_TMP/dynsyms"; then
    missing+=("$s")
  fi
done
if (( ${#missing[@]} )); then
  hk_fail "$HK_LIB does not export: ${missing[*]}"
fi
count=$(wc -l < "$HK_TMP/dynsyms")
hk_note "all ${#symbols[@]} entry points exported ($count defined dynamic symbols in all)"
echo "PASS"
