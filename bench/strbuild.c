/* strbuild.c - naive string building: realloc by exactly the appended size.
 *
 *   strbuild threads seconds
 *
 * Models plain C code that builds a string piece by piece (formatting a
 * log line, a JSON document, an SQL query) without a capacity: the builder
 * starts as malloc(1) holding "", and every append of a 1..64-byte piece
 * calls realloc(buf, len + piece + 1), growing by exactly what is needed.
 * The final length is log-uniform in 64 B..16 KiB.  One string in 8 is then
 * duplicated (malloc + memcpy) into a 32-entry per-thread keep-cache,
 * replacing a random entry, and the builder is freed.
 *
 * The pieces are consecutive slices of a fixed random text, so a finished
 * string must equal a slice of that text: each string is compared with it
 * before it is freed, and so is each cached copy when it is evicted.  A
 * mismatch (realloc lost or overwrote bytes) means exit status 3.
 *
 * ops = malloc + realloc + free calls.  Prints one RESULT line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/rng.h"

#define MIN_LEN 64
#define MAX_LEN (16u << 10)
#define TEXT (2 * MAX_LEN + 128)
#define CACHE 32

static const char alphabet[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.:;{}\"=";

typedef struct {
    char *s;
    size_t start, len;
} kept;

static void work(ts_bench_worker *w)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    char *text = malloc(TEXT);
    if (!text)
        ts_bench_oom("strbuild", TEXT);
    for (size_t i = 0; i < TEXT; i++)
        text[i] = alphabet[ts_xs_below(&r, sizeof alphabet - 1)];
    kept cache[CACHE] = {{0}};
    uint64_t ops = 0, bad = 0;

    while (!ts_bench_stopped(w)) {
        /* log-uniform target length in [64, 16384] */
        unsigned k = 6 + ts_xs_below(&r, 8);                /* 6..13 */
        size_t target = ((size_t)1 << k) + ts_xs_below(&r, (1u << k) + 1);
        size_t start = ts_xs_below(&r, MAX_LEN);

        char *buf = malloc(1);
        if (!buf)
            ts_bench_oom("strbuild", 1);
        buf[0] = '\0';
        ops++;
        size_t len = 0;
        while (len < target) {
            size_t piece = 1 + ts_xs_below(&r, 64);
            char *nb = realloc(buf, len + piece + 1);
            if (!nb)
                ts_bench_oom("strbuild", len + piece + 1);
            ops++;
            buf = nb;
            memcpy(buf + len, text + start + len, piece);
            len += piece;
            buf[len] = '\0';
        }
        if (memcmp(buf, text + start, len) != 0 || buf[len] != '\0')
            bad++;

        if (ts_xs_below(&r, 8) == 0) {
            uint32_t c = ts_xs_below(&r, CACHE);
            if (cache[c].s) {
                if (memcmp(cache[c].s, text + cache[c].start, cache[c].len) != 0 ||
                    cache[c].s[cache[c].len] != '\0')
                    bad++;
                free(cache[c].s);
                ops++;
            }
            char *d = malloc(len + 1);
            if (!d)
                ts_bench_oom("strbuild", len + 1);
            memcpy(d, buf, len + 1);
            ops++;
            cache[c] = (kept){d, start, len};
        }
        free(buf);
        ops++;
    }
    for (int i = 0; i < CACHE; i++)
        if (cache[i].s) {
            if (memcmp(cache[i].s, text + cache[i].start, cache[i].len) != 0)
                bad++;
            free(cache[i].s);
            ops++;
        }
    free(text);
    w->ops = ops;
    w->extra = bad;
}

int main(int argc, char **argv)
{
    return ts_bench_main(argc, argv, "strbuild", "string building with realloc by exactly the appended size", work, "strings were corrupted");
}
