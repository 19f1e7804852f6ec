/* realloc_double.c - one block grown by doubling with realloc: what it costs
 * and how many bytes the allocator copies.
 *
 *   realloc_double [--from-mib F] [--max-mib M] [--max-copied-pct P]
 *                  [--expect-lib NAME]
 *
 * Grows one block from F MiB (1) to M MiB (1024) by doubling, the way a
 * dynamic array or a file slurped into a growing buffer does.  After each
 * realloc it checks a word in every 4 KiB page of the old part (the contents
 * must survive) and writes the new part's pages, as the program would fill
 * them.
 *
 * Bytes copied are counted, not guessed: before each realloc the physical
 * frame of every page of the block is read from /proc/self/pagemap, and after
 * it the frames under the new address; an old page that now sits on another
 * frame was copied (remapping with mremap, or growing in place, keeps the
 * frames).  Frame numbers need CAP_SYS_ADMIN (root); without it the count is
 * reported as unknown.  Also measured: the time spent inside realloc only,
 * the minor page faults taken inside realloc (a copy faults its destination
 * in), how many reallocs returned another address, and, for reference, what
 * copying the final size once with memcpy costs on this machine.
 *
 * Prints one RESULT line:
 *   RESULT realloc_double from_mib=F max_mib=M reallocs=N moved=N
 *          realloc_ms=T copied_bytes=B copied_pct=P memcpy_final_ms=T minflt=N
 * (copied_pct: bytes copied / the final size, in %).  With --max-copied-pct P
 * it exits 1 if more than P% of the final size was copied (exit 77, a skip,
 * if frames cannot be read); it exits 1 if the contents were not kept, or,
 * with --expect-lib NAME, if no mapping of the process names NAME (the
 * LD_PRELOAD did not take).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/args.h"
#include "support/clock.h"
#include "support/rss.h"

#define PAGE 4096u
#define MIB ((size_t)1 << 20)

static uint64_t word_at(size_t off) { return (off * 0x9E3779B97F4A7C15ULL) ^ 0x5DEECE66DULL; }

/* The frame of each page of [p, p + n) (0: not present, or unknown). */
static bool frames(int fd, const void *p, size_t n, uint64_t *out)
{
    size_t pages = n / PAGE;
    off_t at = (off_t)((uintptr_t)p / PAGE * sizeof(uint64_t));
    size_t want = pages * sizeof(uint64_t), got = 0;
    while (got < want) {
        ssize_t r = pread(fd, (char *)out + got, want - got, at + (off_t)got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    for (size_t i = 0; i < pages; i++)
        out[i] = (out[i] >> 63) & 1 ? out[i] & ((1ULL << 55) - 1) : 0;
    return true;
}

static long arg_long(int argc, char **argv, const char *name, long def)
{
    const char *v = ts_arg_str(argc, argv, name);
    return v ? strtol(v, NULL, 10) : def;
}

static bool lib_mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    size_t from = (size_t)arg_long(argc, argv, "--from-mib", 1) * MIB;
    size_t max = (size_t)arg_long(argc, argv, "--max-mib", 1024) * MIB;
    const char *pct_arg = ts_arg_str(argc, argv, "--max-copied-pct");
    double max_pct = pct_arg ? strtod(pct_arg, NULL) : -1;
    const char *lib = ts_arg_str(argc, argv, "--expect-lib");
    if (from < MIB || max < from) {
        fprintf(stderr, "realloc_double: need 1 <= --from-mib <= --max-mib\n");
        return 2;
    }
    if (lib && !lib_mapped(lib)) {
        fprintf(stderr, "realloc_double: FAIL: no mapping of '%s': the preload did not take\n", lib);
        return 1;
    }
    int fd = open("/proc/self/pagemap", O_RDONLY);
    uint64_t *before = malloc(max / PAGE * sizeof(uint64_t));
    uint64_t *after = malloc(max / PAGE * sizeof(uint64_t));
    if (!before || !after) {
        fprintf(stderr, "realloc_double: out of memory for the frame arrays\n");
        return 2;
    }

    unsigned char *p = malloc(from);
    if (!p) {
        fprintf(stderr, "realloc_double: malloc(%zu) failed\n", from);
        return 2;
    }
    for (size_t off = 0; off < from; off += PAGE)
        *(uint64_t *)(p + off) = word_at(off);

    bool known = fd >= 0;   /* frames readable and nonzero */
    unsigned long long copied = 0;
    unsigned reallocs = 0, moved = 0;
    long faults = 0;
    double in_realloc = 0;
    size_t bad_at = SIZE_MAX;
    for (size_t have = from; have < max; have *= 2) {
        size_t n = have * 2;
        if (known && !frames(fd, p, have, before))
            known = false;
        long f0 = ts_minflt();
        double t0 = ts_now();
        unsigned char *q = realloc(p, n);
        in_realloc += ts_now() - t0;
        faults += ts_minflt() - f0;
        if (!q) {
            fprintf(stderr, "realloc_double: realloc(%zu -> %zu) failed\n", have, n);
            return 2;
        }
        reallocs++;
        moved += q != p;
        if (known && !frames(fd, q, have, after))
            known = false;
        if (known) {
            size_t seen = 0;
            for (size_t i = 0; i < have / PAGE; i++) {
                seen += before[i] != 0;
                if (before[i] != 0 && after[i] != before[i])
                    copied += PAGE;
            }
            if (seen == 0)
                known = false;   /* no frame numbers: not root */
        }
        for (size_t off = 0; off < have && bad_at == SIZE_MAX; off += PAGE)
            if (*(uint64_t *)(q + off) != word_at(off))
                bad_at = off;
        for (size_t off = have; off < n; off += PAGE)
            *(uint64_t *)(q + off) = word_at(off);
        p = q;
    }
    /* Reference: one copy of the final size, into memory already faulted in. */
    unsigned char *ref = malloc(max);
    double memcpy_ms = -1;
    if (ref) {
        memset(ref, 1, max);
        double t0 = ts_now();
        memcpy(ref, p, max);
        memcpy_ms = (ts_now() - t0) * 1e3;
        if (ref[max / 2] != p[max / 2])
            bad_at = max / 2;
        free(ref);
    }
    free(p);

    char copied_s[32], pct_s[32];
    if (known) {
        snprintf(copied_s, sizeof copied_s, "%llu", copied);
        snprintf(pct_s, sizeof pct_s, "%.2f", 100.0 * (double)copied / (double)max);
    } else {
        strcpy(copied_s, "unknown");
        strcpy(pct_s, "unknown");
    }
    printf("RESULT realloc_double from_mib=%zu max_mib=%zu reallocs=%u moved=%u realloc_ms=%.3f "
           "copied_bytes=%s copied_pct=%s memcpy_final_ms=%.1f minflt=%ld\n",
           from / MIB, max / MIB, reallocs, moved, in_realloc * 1e3, copied_s, pct_s, memcpy_ms,
           faults);
    fflush(stdout);
    if (bad_at != SIZE_MAX) {
        fprintf(stderr, "realloc_double: FAIL: contents lost at offset %zu\n", bad_at);
        return 1;
    }
    if (max_pct >= 0) {
        if (!known) {
            fprintf(stderr, "realloc_double: frame numbers unreadable (not root?): copies not counted, skipped\n");
            return 77;
        }
        if (100.0 * (double)copied > max_pct * (double)max) {
            fprintf(stderr, "realloc_double: FAIL: realloc copied %llu bytes, %.2f%% of the final %zu MiB (limit %.2f%%)\n",
                    copied, 100.0 * (double)copied / (double)max, max / MIB, max_pct);
            return 1;
        }
    }
    return 0;
}
