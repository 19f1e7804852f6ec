/* HAKMEM_* environment options, read once at initialisation without
 * allocating (getenv does not allocate).
 *
 *   HAKMEM_STATS=1                 count blocks (per thread) and print the counters
 *                                  at exit (stderr, one line); off: no block counts
 *   HAKMEM_PURGE_DELAY_MS=N        free pages stay committed this long (default 50)
 *   HAKMEM_PURGE_THRESHOLD_KB=N    ... unless a heap holds more than this (default 8192)
 *   HAKMEM_SS_RESERVE=N            empty SuperSlabs a heap keeps mapped (default 1)
 *   HAKMEM_RETIRE_BATCH=N          regions unmapped per RCU grace period (default 16)
 *   HAKMEM_SS_CACHE=N              empty SuperSlabs (purged) kept for reuse by any
 *                                  thread instead of unmapped (default 16)
 *   HAKMEM_LARGE_CACHE_KB=N        committed pages of freed large mappings kept
 *                                  for reuse, in total (default 65536); pages
 *                                  idle past the purge delay go back to the OS
 */
#include <stdlib.h>

#include "internal.h"

hak_options_t hak_opt = {
    .stats = false,
    .purge_delay_ms = 50,
    .purge_threshold = (size_t)8 << 20,
    .ss_reserve = 1,
    .retire_batch = 16,
    .ss_cache = 16,
    .large_cache = (size_t)64 << 20,
};

static bool env_u64(const char *name, uint64_t *out)
{
  const char *s = getenv(name);
  if (s == NULL || *s == 0) return false;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + (uint64_t)(*s - '0');
  *out = v;
  return true;
}

void hak_options_init(void)
{
  uint64_t v;
  if (env_u64("HAKMEM_STATS", &v)) hak_opt.stats = v != 0;
  if (env_u64("HAKMEM_SECURE", &v)) hak_opt.secure = v != 0;
  if (env_u64("HAKMEM_PURGE_DELAY_MS", &v)) hak_opt.purge_delay_ms = (uint32_t)v;
  if (env_u64("HAKMEM_PURGE_THRESHOLD_KB", &v)) hak_opt.purge_threshold = (size_t)v << 10;
  if (env_u64("HAKMEM_SS_RESERVE", &v)) hak_opt.ss_reserve = (uint32_t)v;
  if (env_u64("HAKMEM_RETIRE_BATCH", &v)) hak_opt.retire_batch = v ? (uint32_t)v : 1;
  if (env_u64("HAKMEM_SS_CACHE", &v)) hak_opt.ss_cache = (uint32_t)v;
  if (env_u64("HAKMEM_LARGE_CACHE_KB", &v)) hak_opt.large_cache = (size_t)v << 10;
}
