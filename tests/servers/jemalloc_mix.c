/* jemalloc_mix - a probe, not a test: what happens when a program linked with
 * jemalloc runs under LD_PRELOAD=libhakmem.so and mixes the standard entry
 * points (served by hakmem) with jemalloc's own (still served by jemalloc,
 * which hakmem does not export).  See tests/servers/README.md.
 *
 *   cc -O1 -fno-builtin -o jemalloc_mix jemalloc_mix.c -ljemalloc   (libjemalloc-dev)
 *   ./jemalloc_mix CASE; LD_PRELOAD=build/libhakmem.so ./jemalloc_mix CASE
 *
 * CASE: dallocx | sdallocx | rallocx | sallocx   (a malloc'ed block passed to
 *       jemalloc's API), mallocx_free (a mallocx'ed block passed to free),
 *       mallctl (stats.allocated with 1 MB live from malloc).
 */
#include <jemalloc/jemalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
  const char *c = argc > 1 ? argv[1] : "";
  if (strcmp(c, "dallocx") == 0) {
    void *p = malloc(100);
    dallocx(p, 0);
    puts("dallocx(malloc'ed block) returned");
  } else if (strcmp(c, "sdallocx") == 0) {
    void *p = malloc(100);
    memset(p, 1, 100);
    sdallocx(p, 100, 0);
    void *q = mallocx(100, 0);
    printf("sdallocx(malloc'ed block, 100) returned; the next mallocx(100) %s it\n",
           q == p ? "returns" : "does not return");
  } else if (strcmp(c, "rallocx") == 0) {
    char *p = malloc(100);
    memset(p, 7, 100);
    char *q = rallocx(p, 5000, 0);
    printf("rallocx(malloc'ed block, 5000) returned %p, byte 50 = %d\n", (void *)q, q != NULL ? q[50] : -1);
  } else if (strcmp(c, "sallocx") == 0) {
    void *p = malloc(100);
    printf("sallocx(malloc(100)) = %zu, malloc_usable_size = %zu\n", sallocx(p, 0), malloc_usable_size(p));
  } else if (strcmp(c, "mallocx_free") == 0) {
    void *p = mallocx(100, 0);
    free(p);
    puts("free(mallocx'ed block) returned");
  } else if (strcmp(c, "mallctl") == 0) {
    enum { N = 1000 };
    static void *ps[N];
    for (int i = 0; i < N; i++) ps[i] = malloc(1000);
    uint64_t epoch = 1;
    size_t esz = sizeof epoch, allocated = 0, sz = sizeof allocated;
    mallctl("epoch", &epoch, &esz, &epoch, esz);
    int rc = mallctl("stats.allocated", &allocated, &sz, NULL, 0);
    printf("1 MB live from malloc; mallctl(\"stats.allocated\") = %d, %zu bytes\n", rc, allocated);
    for (int i = 0; i < N; i++) free(ps[i]);
  } else {
    fprintf(stderr, "usage: jemalloc_mix dallocx|sdallocx|rallocx|sallocx|mallocx_free|mallctl\n");
    return 2;
  }
  return 0;
}
