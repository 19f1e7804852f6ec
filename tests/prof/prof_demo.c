/* prof_demo: a program for the heap profiler (docs/profiler.md, the tests of
 * tests/prof/), with two allocation sites whose truth is known:
 *
 *   leak_site       allocates LEAK_BLOCKS blocks of LEAK_SIZE bytes and never
 *                   frees them (LEAK_BLOCKS * LEAK_SIZE bytes live at exit)
 *   produce         allocates ITEMS blocks of ITEM_SIZE bytes that a
 *                   consumer thread frees (all of them remote frees)
 *
 *   prof_demo [MODE]
 *     (none)        the two sites, then exit from main
 *     fork          the two sites, then fork: the child runs leak_site again
 *                   (child_site) and exits; the parent waits and exits
 *     thread-exit   the two sites, then main calls pthread_exit: the process
 *                   ends when the last thread, which calls exit(), ends
 *     dump FILE     the two sites, then hak_prof_dump(FILE) (exit 3 if it
 *                   fails)
 *     signal        the two sites, then raise(SIGUSR2) (HAKMEM_PROF_SIGNAL=12
 *                   writes a profile from the handler), then exit
 *
 * Prints the truth on stdout: "leak_bytes=N leak_blocks=N remote_bytes=N
 * remote_blocks=N".  Built with -O1 -fno-inline so each site is a frame of
 * its own; the profiler unwinds with DWARF, frame pointers or not. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEAK_SIZE 4096
#define LEAK_BLOCKS 16384        /* 64 MiB: 128 samples at the default 512 KiB, 512 at 128 KiB */
#define ITEM_SIZE 2048
#define ITEMS 32768              /* 64 MiB, all freed by the consumer */
#define QUEUE 1024

int hak_prof_dump(const char *path) __attribute__((weak));   /* hakmem.h; from the preload library */

static void *volatile sink;
static void *leaked[LEAK_BLOCKS];

__attribute__((noinline)) static void leak_site(void)
{
  for (int i = 0; i < LEAK_BLOCKS; i++) {
    leaked[i] = malloc(LEAK_SIZE);
    memset(leaked[i], 1, 16);
  }
}

__attribute__((noinline)) static void child_site(void) { leak_site(); }

/* A bounded queue between the producer (main) and the consumer. */
static void *queue[QUEUE];
static size_t head, tail;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;

static void put(void *p)
{
  pthread_mutex_lock(&lock);
  while (tail - head == QUEUE) pthread_cond_wait(&not_full, &lock);
  queue[tail++ % QUEUE] = p;
  pthread_cond_signal(&not_empty);
  pthread_mutex_unlock(&lock);
}

static void *get(void)
{
  pthread_mutex_lock(&lock);
  while (tail == head) pthread_cond_wait(&not_empty, &lock);
  void *p = queue[head++ % QUEUE];
  pthread_cond_signal(&not_full);
  pthread_mutex_unlock(&lock);
  return p;
}

static void *consumer(void *arg)
{
  (void)arg;
  for (int i = 0; i < ITEMS; i++) free(get());
  return NULL;
}

__attribute__((noinline)) static void produce(void)
{
  for (int i = 0; i < ITEMS; i++) {
    char *p = malloc(ITEM_SIZE);
    memset(p, 2, 16);
    put(p);
  }
}

static void *last_thread(void *arg)
{
  pthread_join(*(pthread_t *)arg, NULL);   /* main's end */
  sink = malloc(64);
  exit(0);
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  pthread_t c;
  pthread_create(&c, NULL, consumer, NULL);
  leak_site();
  produce();
  pthread_join(c, NULL);
  printf("leak_bytes=%lu leak_blocks=%lu remote_bytes=%lu remote_blocks=%lu\n",
         (unsigned long)LEAK_SIZE * LEAK_BLOCKS, (unsigned long)LEAK_BLOCKS,
         (unsigned long)ITEM_SIZE * ITEMS, (unsigned long)ITEMS);
  fflush(stdout);
  if (strcmp(mode, "fork") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      child_site();
      exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
  }
  if (strcmp(mode, "thread-exit") == 0) {
    static pthread_t self;
    self = pthread_self();
    pthread_t t;
    pthread_create(&t, NULL, last_thread, &self);
    pthread_exit(NULL);
  }
  if (strcmp(mode, "signal") == 0) raise(SIGUSR2);
  if (strcmp(mode, "dump") == 0 && argc > 2) {
    if (hak_prof_dump == NULL || hak_prof_dump(argv[2]) != 0) {
      perror("hak_prof_dump");
      return 3;
    }
  }
  return 0;
}
