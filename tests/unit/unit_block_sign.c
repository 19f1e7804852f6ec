/* unit_block_sign: the free-block signature is bound to the block's address.
 *
 * A live block whose first 16 bytes were copied from a freed block (a program
 * that copies a struct it should not have kept, a pool that copies whole
 * blocks) is not a free block: its single free succeeds.  A true double free
 * of the freed block is still caught.  Each case runs in a child process, so
 * an abort is seen as such.  Under ThreadSanitizer fork is not used: skip.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/child.h"

static const size_t sizes[] = {32, 64, 1000, 130048};

/* Free a; copy its first 16 bytes (a freed block's words) into the live
 * block b; free b. */
static void copied_free(const void *ctx) {
  size_t n = *(const size_t *)ctx;
  char *a = hak_malloc(n), *b = hak_malloc(n);
  if (a == NULL || b == NULL) _exit(3);
  memset(a, 1, n);
  memset(b, 2, n);
  hak_free(a);
  memcpy(b, a, 16); /* the words of a free block, read after its free */
  hak_free(b);
}

static size_t df_size;
static void double_free_after_copy(void) {
  char *a = hak_malloc(df_size), *b = hak_malloc(df_size);
  if (a == NULL || b == NULL) _exit(3);
  hak_free(a);
  memcpy(b, a, 16);
  hak_free(b);
  hak_free(a); /* the double free, still caught */
  _exit(0);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
#if defined(__SANITIZE_THREAD__)
  puts("unit_block_sign: skipped under ThreadSanitizer (fork)");
  return 77;
#endif
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "a copied free block's words, %zu B", sizes[i]);
    ts_check_begin(name);
    char buf[512];
    int st = ts_capture_child(copied_free, &sizes[i], buf, sizeof buf, NULL);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the single free of the live block failed (%s %d); stderr: %s",
          WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), buf);
    df_size = sizes[i];
    /* Any hakmem abort: a 130048-byte block is alone in its slab, which goes
     * back when it is freed, so the second free is "not a block start". */
    ts_misuse m = {"double free after the copy", double_free_after_copy, NULL};
    ts_expect_abort("copied words", &m, 10);
  }
  return ts_check_finish("unit_block_sign");
}
