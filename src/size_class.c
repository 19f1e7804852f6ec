/* Size classes: size -> class tables, class -> block size and slab span.
 *
 * Classes: 16..128 bytes in steps of 16 (the hottest range, dense), then four
 * classes per power of two up to 256 KiB, so a block wastes under 25% of a
 * request above 64 bytes.  The tables are constant (checked against the
 * formulas at start-up in debug builds): malloc may run before any
 * initialisation code. */
#include "internal.h"

const uint32_t hak_class_size[HAK_NUM_CLASSES] = {
  16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256,
  320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048,
  2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
  20480, 24576, 28672, 32768, 40960, 49152, 57344, 65536, 81920, 98304, 114688, 131072,
  163840, 196608, 229376, 262144,
};

/* Units of 64 KiB per slab: at least 8 blocks a slab, at most 16 units. */
const uint8_t hak_class_span[HAK_NUM_CLASSES] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  2, 2, 2, 2, 3, 3, 4, 4, 5, 6, 7, 8, 10, 12, 14, 16,
  16, 16, 16, 16,
};

/* Remote frees a heap holds back per slab of the class before it pushes
 * them (remote.c): HAK_REMOTE_BATCH, or 64 KiB of blocks, at least one. */
const uint8_t hak_class_batch[HAK_NUM_CLASSES] = {
  64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
  64, 64, 64, 64, 51, 42, 36, 32, 25, 21, 18, 16, 12, 10, 9, 8,
  6, 5, 4, 4, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1,
};

/* (n + 15) >> 4 -> class, for n <= 1024. */
const uint8_t hak_class_small[1024 / 16 + 1] = {
  0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11,
  11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15,
  15, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17, 17, 17,
  17, 18, 18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19,
  19,
};

int hak_size_class_aligned(size_t n, size_t align)
{
  if (n > HAK_SMALL_MAX || align > HAK_SLAB_ALIGN) return -1;
  for (size_t c = hak_size_class(n); c < HAK_NUM_CLASSES; c++)
    if (hak_class_size[c] % align == 0) return (int)c;
  return -1;
}

#ifndef NDEBUG
/* The tables agree with the formula in internal.h and are monotonic. */
void hak_size_class_check(void)
{
  for (size_t n = 1; n <= HAK_SMALL_MAX; n++) {
    size_t c = hak_size_class(n);
    if (hak_class_size[c] < n || (c > 0 && hak_class_size[c - 1] >= n)) hak_fatal("size class table", (void *)n);
  }
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    size_t b = (size_t)64 * 1024 / hak_class_size[c];
    b = b > HAK_REMOTE_BATCH ? HAK_REMOTE_BATCH : b == 0 ? 1 : b;
    if (hak_class_batch[c] != b) hak_fatal("remote batch table", (void *)c);
  }
}
#endif
