/* mallinfo_churn.c - mallinfo2's uordblks is the bytes of live blocks, and
 * does not grow with the number of threads that came and went.
 *
 *   mallinfo_churn [THREADS]        (default 20000)
 *
 * Run with LD_PRELOAD=libhakmem.so and the statistics OFF (HAKMEM_STATS
 * unset), the way a monitoring agent or a leak test reads a program's
 * mallinfo2; it passes under glibc's malloc too.  THREADS short-lived
 * threads, four at a time, each allocate 64 blocks of 16..1000 bytes and a
 * 40 KiB one and free them all.  uordblks is read before the first thread,
 * after half of the churn and at its end: it must not grow by 64 KiB or
 * more (the threads leaked nothing, so nothing of theirs is live).  Then N live blocks
 * of 100 bytes must show in uordblks (at least N x 100 bytes more) and go
 * away when freed, so the figure is not a constant either.
 *
 * Prints "malloc: hakmem" or "malloc: glibc" first (whether a mapping of
 * the process names libhakmem), for the script to check the preload took.
 * Exit 0: pass; 1: a check failed; 2: could not run.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROW_LIMIT (64u << 10)
#define BATCH 4
#define NBLOCKS 64
#define LIVE 2000
#define LIVE_SIZE 100

static int failures;

static bool hakmem_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL) found = strstr(line, "libhakmem") != NULL;
    if (f != NULL) fclose(f);
    return found;
}

static void *worker(void *arg)
{
    unsigned x = (unsigned)(size_t)arg * 2654435761u + 1;
    void *p[NBLOCKS + 1];
    for (int i = 0; i < NBLOCKS; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = malloc(16 + (x >> 8) % 985);
        if (p[i] != NULL) memset(p[i], i, 16);
    }
    p[NBLOCKS] = malloc(40 << 10);
    for (int i = NBLOCKS; i >= 0; i--) free(p[i]);
    return NULL;
}

/* n threads, BATCH at a time; false if one could not start. */
static bool churn(long n, long *next_id)
{
    for (long done = 0; done < n; done += BATCH) {
        pthread_t t[BATCH];
        int k = 0;
        for (; k < BATCH && done + k < n; k++)
            if (pthread_create(&t[k], NULL, worker, (void *)(size_t)(*next_id)++) != 0) return false;
        while (k-- > 0) pthread_join(t[k], NULL);
    }
    return true;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? atol(argv[1]) : 20000;
    long id = 0;
    if (threads < 2) return 2;
    printf("malloc: %s\n", hakmem_mapped() ? "hakmem" : "glibc");
    struct mallinfo2 m0 = mallinfo2();
    if (!churn(threads / 2, &id)) return 2;
    struct mallinfo2 m1 = mallinfo2();
    if (!churn(threads - threads / 2, &id)) return 2;
    struct mallinfo2 m2 = mallinfo2();
    printf("uordblks before the threads: %zu, after %ld: %zu, after %ld more: %zu (arena %zu -> %zu)\n",
           m0.uordblks, threads / 2, m1.uordblks, threads - threads / 2, m2.uordblks,
           m0.arena, m2.arena);
    if (m1.uordblks >= m0.uordblks + GROW_LIMIT || m2.uordblks >= m0.uordblks + GROW_LIMIT) {
        fprintf(stderr, "FAIL: uordblks grew from %zu to %zu and %zu over a churn of threads that freed "
                "everything they allocated (limit %u bytes)\n", m0.uordblks, m1.uordblks, m2.uordblks,
                GROW_LIMIT);
        failures++;
    }

    static void *live[LIVE];
    for (int i = 0; i < LIVE; i++)
        if ((live[i] = malloc(LIVE_SIZE)) == NULL) return 2;
    struct mallinfo2 m3 = mallinfo2();
    for (int i = 0; i < LIVE; i++) free(live[i]);
    struct mallinfo2 m4 = mallinfo2();
    printf("uordblks with %d live blocks of %d bytes: %zu, after they are freed: %zu\n", LIVE, LIVE_SIZE,
           m3.uordblks, m4.uordblks);
    if (m3.uordblks < m2.uordblks + (size_t)LIVE * LIVE_SIZE) {
        fprintf(stderr, "FAIL: %d live blocks of %d bytes took uordblks only from %zu to %zu\n", LIVE,
                LIVE_SIZE, m2.uordblks, m3.uordblks);
        failures++;
    }
    if (m4.uordblks + (size_t)LIVE * LIVE_SIZE > m3.uordblks) {
        fprintf(stderr, "FAIL: freeing %d blocks of %d bytes took uordblks only from %zu to %zu\n", LIVE,
                LIVE_SIZE, m3.uordblks, m4.uordblks);
        failures++;
    }
    return failures != 0;
}
