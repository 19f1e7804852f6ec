/* run_self.h: run this test program again as a child, with its stderr
 * captured, for the tests that check what a process prints at start-up or
 * at exit (unit_options, unit_stats).
 *
 * run_self(arg, setup, ctx, buf, size) forks; the child sends its stderr into
 * a pipe, calls setup(ctx) (its environment, say) and execs /proc/self/exe
 * with argv { its own name, arg }.  The parent reads the child's whole stderr into
 * buf (at most size - 1 bytes, NUL-terminated), waits for it and returns its
 * exit status, or 128 + the signal that killed it.  Needs _GNU_SOURCE
 * (program_invocation_short_name) and check.h (REQUIRE). */
#ifndef HAKMEM_TEST_RUN_SELF_H
#define HAKMEM_TEST_RUN_SELF_H

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_self(const char *arg, void (*setup)(const void *ctx), const void *ctx, char *buf, size_t size)
{
  int fds[2];
  REQUIRE(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    setup(ctx);
    execl("/proc/self/exe", program_invocation_short_name, arg, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fds[0], buf + n, size - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
    if (n == size - 1) break;
  }
  buf[n] = 0;
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif /* HAKMEM_TEST_RUN_SELF_H */
