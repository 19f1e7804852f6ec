/* runmeasure.c - run one benchmark process and measure its peak RSS.
 *
 *   runmeasure [-p preload.so] [-t timeout_s] [-o result_file] -- prog [args...]
 *
 * Forks, sets LD_PRELOAD=preload.so in the child only (with -p ""; or no -p,
 * LD_PRELOAD is removed, so the child runs on glibc malloc), and execs the
 * program with stdout and stderr inherited.  This wrapper itself is never
 * preloaded, so its own allocations do not disturb the measurement.
 *
 * When the child ends, one line goes to result_file (stderr without -o):
 *
 *   maxrss_kb=<N> minflt=<N> wall_s=<S> status=<exit:C | signal:N | timeout>
 *
 * maxrss_kb is the child's ru_maxrss from wait4(): its peak resident set in
 * KiB; minflt its ru_minflt, the minor page faults it took (a first touch of
 * a page, or a touch of one given back with madvise).  If the child
 * outlives timeout_s seconds it is killed with SIGKILL.
 * Exit status: the child's, 128+N for a signal, 124 for a timeout, 125 for a
 * usage error, 127 if the program could not be executed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/clock.h"

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: runmeasure [-p preload.so] [-t timeout_s] [-o result_file] "
                    "-- prog [args...]\n");
    exit(125);
}

int main(int argc, char **argv)
{
    const char *preload = NULL, *outpath = NULL;
    unsigned timeout = 0;
    int opt;
    while ((opt = getopt(argc, argv, "+p:t:o:")) != -1) {
        switch (opt) {
        case 'p': preload = optarg; break;
        case 't': timeout = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'o': outpath = optarg; break;
        default: usage();
        }
    }
    if (optind >= argc)
        usage();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;      /* no SA_RESTART: wait4 returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);

    double t0 = ts_now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("runmeasure: fork");
        return 125;
    }
    if (pid == 0) {
        if (preload && *preload)
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        execvp(argv[optind], &argv[optind]);
        fprintf(stderr, "runmeasure: cannot execute %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    if (timeout)
        alarm(timeout);

    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    for (;;) {
        pid_t r = wait4(pid, &st, 0, &ru);
        if (r == pid)
            break;
        if (r < 0 && errno == EINTR) {
            if (timed_out)
                kill(pid, SIGKILL);
            continue;
        }
        perror("runmeasure: wait4");
        return 125;
    }
    double wall = ts_now() - t0;
    alarm(0);

    char status[32];
    int rc;
    if (timed_out) {
        snprintf(status, sizeof status, "timeout");
        rc = 124;
    } else if (WIFSIGNALED(st)) {
        snprintf(status, sizeof status, "signal:%d", WTERMSIG(st));
        rc = 128 + WTERMSIG(st);
    } else {
        snprintf(status, sizeof status, "exit:%d", WEXITSTATUS(st));
        rc = WEXITSTATUS(st);
    }

    FILE *out = stderr;
    if (outpath) {
        out = fopen(outpath, "w");
        if (!out) {
            perror("runmeasure: result file");
            return 125;
        }
    }
    fprintf(out, "maxrss_kb=%ld minflt=%ld wall_s=%.3f status=%s\n", ru.ru_maxrss, ru.ru_minflt, wall, status);
    if (out != stderr)
        fclose(out);
    return rc;
}
