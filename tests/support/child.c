/* child.c - children with their stderr captured (child.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* program_invocation_short_name */
#endif
#include "child.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

int ts_capture_child(void (*child)(const void *ctx), const void *ctx, char *buf, size_t size,
                     size_t *len)
{
    fflush(NULL);
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        child(ctx);
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fds[0], buf + n, size - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == size - 1) { /* keep draining so the child never blocks */
            char sink[512];
            while (read(fds[0], sink, sizeof sink) > 0) {
            }
            break;
        }
    }
    buf[n] = 0;
    if (len)
        *len = n;
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return st;
}

struct self_run {
    const char *arg;
    void (*setup)(const void *ctx);
    const void *ctx;
};

static void exec_self(const void *p)
{
    const struct self_run *s = p;
    s->setup(s->ctx);
    execl("/proc/self/exe", program_invocation_short_name, s->arg, (char *)NULL);
    _exit(127);
}

int ts_run_self(const char *arg, void (*setup)(const void *ctx), const void *ctx, char *buf,
                size_t size)
{
    struct self_run s = {arg, setup, ctx};
    int st = ts_capture_child(exec_self, &s, buf, size, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct misuse_run {
    const ts_misuse *m;
    unsigned seconds;
};

static void run_misuse(const void *p)
{
    const struct misuse_run *r = p;
    alarm(r->seconds);
    r->m->fn();
}

void ts_expect_abort(const char *group, const ts_misuse *m, unsigned child_seconds)
{
    char section[96];
    snprintf(section, sizeof section, "%s: %s", group, m->name);
    ts_check_begin(section);
    char buf[4096];
    size_t len;
    struct misuse_run r = {m, child_seconds};
    int st = ts_capture_child(run_misuse, &r, buf, sizeof buf, &len);
    bool sig = WIFSIGNALED(st);
    int signo = sig ? WTERMSIG(st) : 0;
    CHECK(sig && signo == SIGABRT, "%s: child %s %d (expected death by SIGABRT); its stderr: <<%s>>",
          m->name, sig ? "died of signal" : "exited with status", sig ? signo : WEXITSTATUS(st), buf);
    CHECK(strstr(buf, "hakmem") != NULL, "%s: child's stderr does not mention hakmem: <<%s>>", m->name,
          buf);
    if (m->msg != NULL)
        CHECK(strstr(buf, m->msg) != NULL, "%s: child's stderr does not say \"%s\": <<%s>>", m->name,
              m->msg, buf);
    if (sig && signo == SIGABRT)
        printf("   detected: %s%s", buf, len && buf[len - 1] == '\n' ? "" : "\n");
}
