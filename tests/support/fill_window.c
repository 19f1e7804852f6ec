/* fill_window.c - the window pattern (fill.h). */
#include "fill.h"

#include <string.h>

static uint64_t pat_table[2 * TS_PAT_WORDS];

__attribute__((constructor)) static void pat_init(void)
{
    ts_rng r = {0x5DEECE66DA3C9E21ull};
    for (unsigned i = 0; i < TS_PAT_WORDS; i++)
        pat_table[i] = pat_table[i + TS_PAT_WORDS] = ts_rng_next(&r);
}

const unsigned char *ts_pat_window(uint64_t seed)
{
    return (const unsigned char *)&pat_table[seed % TS_PAT_WORDS];
}

void ts_pat_fill(void *p, size_t size, uint64_t seed)
{
    const unsigned char *w = ts_pat_window(seed);
    unsigned char *b = (unsigned char *)p;
    for (size_t off = 0; off < size; off += TS_PAT_BYTES)
        memcpy(b + off, w, size - off < TS_PAT_BYTES ? size - off : TS_PAT_BYTES);
}

size_t ts_pat_check(const void *p, size_t len, uint64_t seed)
{
    const unsigned char *w = ts_pat_window(seed);
    const unsigned char *b = (const unsigned char *)p;
    for (size_t off = 0; off < len; off += TS_PAT_BYTES) {
        size_t n = len - off < TS_PAT_BYTES ? len - off : TS_PAT_BYTES;
        if (memcmp(b + off, w, n) != 0) {
            for (size_t i = 0; i < n; i++)
                if (b[off + i] != w[i])
                    return off + i;
        }
    }
    return (size_t)-1;
}
