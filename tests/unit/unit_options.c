/* unit_options: HAKMEM_* options are read once at start-up; a value that does
 * not parse, overflows or is out of range is reported once on stderr and the
 * default kept; HAKMEM_VERBOSE=1 prints the options in force.
 *
 *   unit_options         the checks (each runs `unit_options child` with an
 *                        environment and reads its stderr)
 *   unit_options child   initialise hakmem (one malloc/free) and exit
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/child.h"

/* Every HAKMEM_ option the library knows (src/options.c). */
static const char *const all_options[] = { "HAKMEM_STATS", "HAKMEM_VERBOSE", "HAKMEM_SECURE", "HAKMEM_PURGE_DELAY_MS",
                                           "HAKMEM_PURGE_THRESHOLD_KB", "HAKMEM_SS_RESERVE", "HAKMEM_SS_CACHE",
                                           "HAKMEM_PARKED_HEAPS", "HAKMEM_RETIRE_BATCH", "HAKMEM_LARGE_CACHE_KB", "HAKMEM_LARGE_ARENA",
                                           "HAKMEM_HUGEPAGES",
                                           "HAKMEM_PROF", "HAKMEM_PROF_SAMPLE", "HAKMEM_PROF_SIGNAL",
                                           "HAKMEM_PROF_LEAKS", "HAKMEM_PURGE_THREAD", "HAKMEM_CACHE_DELAY_MS", "HAKMEM_IDLE_TAKE",
                                           "HAKMEM_PROF_FILE" };
#define N_OPTIONS (sizeof all_options / sizeof *all_options)

/* In the child: env ("NAME=value" strings, NULL-terminated) on top of an
 * environment without any HAKMEM_ option. */
static void child_env(const void *ctx)
{
  for (size_t i = 0; i < N_OPTIONS; i++) unsetenv(all_options[i]);
  for (const char *const *env = ctx; *env; env++) putenv((char *)*env);
}

/* Run `unit_options child` with env; its stderr into buf. */
static int run_child(const char *const *env, char *buf, size_t size)
{
  return ts_run_self("child", child_env, env, buf, size);
}

static size_t count(const char *text, const char *what)
{
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
  return n;
}

/* One invalid value: exactly this message, once, and nothing else. */
static void invalid(const char *setting, const char *message)
{
  char out[4096];
  const char *env[] = { setting, NULL };
  int rc = run_child(env, out, sizeof out);
  CHECK(rc == 0, "%s: child exited with %d", setting, rc);
  CHECK(strcmp(out, message) == 0, "%s: stderr\n  '%s'\nexpected\n  '%s'", setting, out, message);
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    void *p = hak_malloc(100);
    hak_free(p);
    return p == NULL;
  }
  char out[8192];

  ts_check_section("invalid values");
  invalid("HAKMEM_PURGE_DELAY_MS=12x",
          "hakmem: ignoring HAKMEM_PURGE_DELAY_MS=12x: trailing characters after the number; using 50\n");
  invalid("HAKMEM_PURGE_DELAY_MS=-5", "hakmem: ignoring HAKMEM_PURGE_DELAY_MS=-5: not a decimal number; using 50\n");
  invalid("HAKMEM_PURGE_DELAY_MS=3600001",
          "hakmem: ignoring HAKMEM_PURGE_DELAY_MS=3600001: out of range 0..3600000 ms; using 50\n");
  invalid("HAKMEM_STATS=3", "hakmem: ignoring HAKMEM_STATS=3: out of range 0..2; using 0\n");
  invalid("HAKMEM_SS_CACHE=99999999999999999999999",
          "hakmem: ignoring HAKMEM_SS_CACHE=99999999999999999999999: too large; using 16\n");
  invalid("HAKMEM_RETIRE_BATCH=0", "hakmem: ignoring HAKMEM_RETIRE_BATCH=0: out of range 1..65536; using 16\n");
  invalid("HAKMEM_LARGE_CACHE_KB= 64", "hakmem: ignoring HAKMEM_LARGE_CACHE_KB= 64: not a decimal number; using 65536\n");
  invalid("HAKMEM_SS_RESERVE=1\n2", "hakmem: ignoring HAKMEM_SS_RESERVE=1?2: trailing characters after the number; using 1\n");

  ts_check_section("valid values are silent");
  {
    const char *env[] = { "HAKMEM_PURGE_DELAY_MS=0", "HAKMEM_SS_CACHE=65536", "HAKMEM_PURGE_THRESHOLD_KB=",
                          "HAKMEM_VERBOSE=0", NULL };
    int rc = run_child(env, out, sizeof out);
    CHECK(rc == 0 && out[0] == 0, "exit %d, stderr: '%s'", rc, out);
  }

  ts_check_section("verbose");
  {
    const char *env[] = { "HAKMEM_VERBOSE=1", "HAKMEM_PURGE_DELAY_MS=20", "HAKMEM_STATS=x", NULL };
    int rc = run_child(env, out, sizeof out);
    CHECK(rc == 0, "exit %d", rc);
    CHECK(count(out, "hakmem: option HAKMEM_") == N_OPTIONS, "%zu option lines, expected %zu:\n%s",
          count(out, "hakmem: option HAKMEM_"), N_OPTIONS, out);
    for (size_t i = 0; i < N_OPTIONS; i++) {
      char want[64];
      snprintf(want, sizeof want, "hakmem: option %s=", all_options[i]);
      CHECK(count(out, want) == 1, "'%s' printed %zu times:\n%s", want, count(out, want), out);
    }
    CHECK(strstr(out, "hakmem: option HAKMEM_PURGE_DELAY_MS=20 ms (from the environment; default 50, range "
                      "0..3600000 ms)\n") != NULL, "purge delay line missing:\n%s", out);
    CHECK(strstr(out, "hakmem: option HAKMEM_LARGE_CACHE_KB=65536 KiB (default; range 0..1073741824 KiB)\n") != NULL,
          "large cache line missing:\n%s", out);
    CHECK(strstr(out, "hakmem: option HAKMEM_STATS=0 (default; range 0..2)\n") != NULL &&
              count(out, "hakmem: ignoring HAKMEM_STATS=x: not a decimal number; using 0\n") == 1,
          "the invalid HAKMEM_STATS is reported once and 0 is in force:\n%s", out);
  }
  return ts_check_finish("unit_options");
}
