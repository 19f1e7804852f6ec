/* strings.c - small-string building: many tiny mallocs of 8..64 bytes.
 *
 *   strings threads seconds
 *
 * Models parsing a request into tokens, header names and values: each
 * thread handles "requests" in a loop.  A request duplicates 64..512 words
 * of 7..63 characters into fresh blocks (a strdup written here, malloc +
 * memcpy, so the allocation goes through malloc), joins neighbouring pairs
 * into new short strings (key=value style, capped at 64 bytes), keeps a few
 * strings alive across requests in a small per-thread cache (replacing a
 * random entry), and then frees the rest, half in allocation order and half
 * in reverse.  All blocks are 8..64 bytes: the smallest classes, which the
 * first hakmem prototype could not serve in time.
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/rng.h"

#define MAX_WORDS 512
#define CACHE 256

static const char alphabet[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:";

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        ts_bench_oom("strings", n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void work(ts_bench_worker *w)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    char text[4096];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = alphabet[ts_xs_below(&r, sizeof alphabet - 1)];

    char *words[MAX_WORDS];
    char *joined[MAX_WORDS / 2];
    char *cache[CACHE] = {0};
    uint64_t ops = 0;
    size_t checksum = 0;

    while (!ts_bench_stopped(w)) {
        int nw = 64 + (int)ts_xs_below(&r, MAX_WORDS - 64 + 1);
        for (int i = 0; i < nw; i++) {
            size_t len = 7 + ts_xs_below(&r, 57);          /* 7..63 */
            size_t off = ts_xs_below(&r, (uint32_t)(sizeof text - len));
            words[i] = dup_n(text + off, len);
        }
        ops += (uint64_t)nw;

        int nj = nw / 2;
        for (int i = 0; i < nj; i++) {
            const char *a = words[2 * i], *b = words[2 * i + 1];
            size_t la = strlen(a), lb = strlen(b);
            if (la > 31)
                la = 31;
            if (lb > 31)
                lb = 31;
            char *p = malloc(la + lb + 2);                      /* 9..64 */
            if (!p)
                ts_bench_oom("strings", la + lb + 2);
            memcpy(p, a, la);
            p[la] = '=';
            memcpy(p + la + 1, b, lb);
            p[la + lb + 1] = '\0';
            joined[i] = p;
        }
        ops += (uint64_t)nj;

        /* keep a few strings across requests */
        for (int i = 0; i < 4; i++) {
            uint32_t c = ts_xs_below(&r, CACHE);
            if (cache[c]) {
                checksum += (unsigned char)cache[c][0];
                free(cache[c]);
                ops++;
            }
            int j = (int)ts_xs_below(&r, (uint32_t)nj);
            cache[c] = joined[j];
            joined[j] = NULL;
        }

        for (int i = 0; i < nw; i += 2) {
            checksum += (unsigned char)words[i][0];
            free(words[i]);
        }
        for (int i = (nw - 1) | 1; i > 0; i -= 2)
            if (i < nw) {
                checksum += (unsigned char)words[i][1];
                free(words[i]);
            }
        ops += (uint64_t)nw;
        for (int i = nj - 1; i >= 0; i--)
            if (joined[i]) {
                free(joined[i]);
                ops++;
            }
    }
    for (int i = 0; i < CACHE; i++)
        if (cache[i]) {
            free(cache[i]);
            ops++;
        }
    w->ops = ops;
    w->extra = checksum;
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    static ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv, "small-string building in 8..64 byte blocks", &threads, &secs);
    double el = ts_bench_run(threads, secs, work, NULL, w);
    ts_bench_report("strings", threads, el, ts_bench_sum_ops(w, threads), NULL);
    return 0;
}
