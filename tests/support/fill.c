/* fill.c - the word pattern and the stamp (fill.h).  The window pattern is
 * in fill_window.c: its 1 MiB table is linked only into the programs that use
 * it. */
#include "fill.h"

#include <string.h>

/* ------------------------------------------------------------ word pattern */

void ts_words_fill(void *p, size_t n, uintptr_t seed)
{
    unsigned char *b = p;
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t v = ts_words_mix(seed, k);
        memcpy(b + k * 8, &v, 8);
    }
    uint64_t v = ts_words_mix(seed, k);
    for (size_t i = k * 8; i < n; i++, v >>= 8)
        b[i] = (unsigned char)v;
}

size_t ts_words_verify(const void *p, size_t n, uintptr_t seed)
{
    const unsigned char *b = p;
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t v = ts_words_mix(seed, k), w;
        memcpy(&w, b + k * 8, 8);
        if (w != v) {
            for (size_t i = 0; i < 8; i++, v >>= 8)
                if (b[k * 8 + i] != (unsigned char)v)
                    return k * 8 + i;
        }
    }
    uint64_t v = ts_words_mix(seed, k);
    for (size_t i = k * 8; i < n; i++, v >>= 8)
        if (b[i] != (unsigned char)v)
            return i;
    return n;
}

size_t ts_first_nonzero(const void *p, size_t n)
{
    static const unsigned char zero[4096];
    const unsigned char *b = p;
    for (size_t off = 0; off < n; off += sizeof zero) {
        size_t len = n - off < sizeof zero ? n - off : sizeof zero;
        if (memcmp(b + off, zero, len) != 0) {
            for (size_t i = off; i < off + len; i++)
                if (b[i])
                    return i;
        }
    }
    return n;
}

/* ------------------------------------------------------------------ stamp */

uint64_t ts_stamp_tag(uint64_t owner, uint64_t idx, size_t size)
{
    return ts_hash_pair(owner ^ ((uint64_t)size << 40), idx);
}

void ts_stamp_fill(void *p, size_t size, uint64_t tag)
{
    unsigned char *b = (unsigned char *)p;
    if (size <= 256) {
        for (size_t i = 0; i < size; i++)
            b[i] = (unsigned char)(tag >> ((i & 7) * 8)) ^ (unsigned char)i;
        return;
    }
    memcpy(b, &tag, 8);
    memcpy(b + 8, &size, 8);
    for (size_t off = 4096; off + 8 <= size - 16; off += 4096) {
        uint64_t v = tag ^ off;
        memcpy(b + off, &v, 8);
    }
    uint64_t t2 = ~tag;
    memcpy(b + size - 16, &t2, 8);
    memcpy(b + size - 8, &size, 8);
}

int ts_stamp_check(const void *p, size_t size, uint64_t tag)
{
    const unsigned char *b = (const unsigned char *)p;
    if (size <= 256) {
        for (size_t i = 0; i < size; i++)
            if (b[i] != ((unsigned char)(tag >> ((i & 7) * 8)) ^ (unsigned char)i))
                return 0;
        return 1;
    }
    uint64_t v;
    size_t sz;
    memcpy(&v, b, 8);
    memcpy(&sz, b + 8, 8);
    if (v != tag || sz != size)
        return 0;
    for (size_t off = 4096; off + 8 <= size - 16; off += 4096) {
        memcpy(&v, b + off, 8);
        if (v != (tag ^ off))
            return 0;
    }
    memcpy(&v, b + size - 16, 8);
    memcpy(&sz, b + size - 8, 8);
    return v == ~tag && sz == size;
}
