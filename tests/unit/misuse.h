/* misuse.h: run a misuse case (a double free, an interior free...) in a
 * forked child and check that hakmem stopped it the way it promises: death by
 * SIGABRT, with a message on stderr that names hakmem.  For the C tests that
 * include check.h; a test defines CHILD_SECONDS (the child's alarm) first. */
#ifndef HAKMEM_TEST_MISUSE_H
#define HAKMEM_TEST_MISUSE_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#ifndef CHILD_SECONDS
#define CHILD_SECONDS 20
#endif

/* msg: a part of the message the abort must print (NULL: any that names
 * hakmem). */
struct misuse { const char *name; void (*fn)(void); const char *msg; };

/* Runs fn in a child with stderr on a pipe; checks SIGABRT and the message. */
static void expect_abort(const char *group, const struct misuse *m) {
  char section[96];
  snprintf(section, sizeof section, "%s: %s", group, m->name);
  check_begin(section);
  fflush(NULL);
  int fds[2];
  REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    close(fds[1]);
    alarm(CHILD_SECONDS);
    m->fn();
    _exit(0);
  }
  close(fds[1]);
  char buf[4096];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fds[0], buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == sizeof buf - 1) { /* keep draining so the child never blocks */
      char sink[512];
      while (read(fds[0], sink, sizeof sink) > 0) {}
      break;
    }
  }
  buf[len] = 0;
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  bool sig = WIFSIGNALED(st);
  int signo = sig ? WTERMSIG(st) : 0;
  CHECK(sig && signo == SIGABRT, "%s: child %s %d (expected death by SIGABRT); its stderr: <<%s>>",
        m->name, sig ? "died of signal" : "exited with status", sig ? signo : WEXITSTATUS(st), buf);
  CHECK(strstr(buf, "hakmem") != NULL, "%s: child's stderr does not mention hakmem: <<%s>>", m->name, buf);
  if (m->msg != NULL)
    CHECK(strstr(buf, m->msg) != NULL, "%s: child's stderr does not say \"%s\": <<%s>>", m->name, m->msg, buf);
  if (sig && signo == SIGABRT) printf("   detected: %s%s", buf, len && buf[len - 1] == '\n' ? "" : "\n");
}

#endif /* HAKMEM_TEST_MISUSE_H */
