/* tk_test_main.c: runs the registered C tests.
 *
 *   tk_tests [--threaded] [SUBSTRING...]
 *
 * --threaded runs only the multi-threaded tests (the ThreadSanitizer build
 * uses it); SUBSTRINGs select tests by name. Prints one line per test and
 * ends with "N passed, N failed"; exits 1 when any test failed.
 *
 * A test that runs past its time (TK_TEST_SECONDS, else 120 s, or 1800 s
 * with TK_TEST_LONG) is a hang: its name is printed and the run ends with
 * status 1, so that a loop that never ends fails instead of stalling CI.
 */
#include "tk_test.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TK_MAX_TESTS 1024

struct tk_test {
    const char *file;
    const char *name;
    tk_test_fn fn;
    int threaded;
};

static struct tk_test tests[TK_MAX_TESTS];
static int ntests;
static atomic_int failures; /* failures in the running test */

void tk_test_register(const char *file, const char *name, tk_test_fn fn,
                      int threaded)
{
    if (ntests == TK_MAX_TESTS) {
        fprintf(stderr, "tk_test: more than %d tests\n", TK_MAX_TESTS);
        exit(2);
    }
    tests[ntests++] = (struct tk_test){file, name, fn, threaded};
}

void tk_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    /* Print at most a few failures per test: a broken loop would flood. */
    if (atomic_fetch_add(&failures, 1) >= 10)
        return;
    flockfile(stdout);
    printf("    %s:%d: check failed: ", file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    funlockfile(stdout);
}

int tk_test_long(void)
{
    const char *v = getenv("TK_TEST_LONG");
    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

long tk_test_iters(long base, long factor)
{
    return tk_test_long() ? base * factor : base;
}

static const char *volatile running; /* the test the watchdog names */

/* SIGALRM: only async-signal-safe calls (write, _exit). */
static void on_alarm(int sig)
{
    (void)sig;
    static const char head[] = "FAIL ";
    static const char tail[] = ": still running at its time limit (a hang?)\n";
    const char *name = running;
    ssize_t r = write(STDOUT_FILENO, head, sizeof head - 1);
    r = write(STDOUT_FILENO, name, strlen(name));
    r = write(STDOUT_FILENO, tail, sizeof tail - 1);
    (void)r;
    _exit(1);
}

static unsigned time_limit(void)
{
    const char *v = getenv("TK_TEST_SECONDS");
    if (v != NULL && *v != '\0') {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*end == '\0' && n > 0 && n <= 86400)
            return (unsigned)n;
        fprintf(stderr, "tk_test: TK_TEST_SECONDS=%s is not 1..86400\n", v);
        exit(2);
    }
    return tk_test_long() ? 1800 : 120;
}

static int by_file_then_name(const void *a, const void *b)
{
    const struct tk_test *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c != 0 ? c : strcmp(x->name, y->name);
}

static int selected(const struct tk_test *t, int threaded_only, int argc,
                    char **argv)
{
    int any = 0;
    if (threaded_only && !t->threaded)
        return 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        any = 1;
        if (strstr(t->name, argv[i]) != NULL)
            return 1;
    }
    return !any;
}

int main(int argc, char **argv)
{
    int threaded_only = 0, passed = 0, failed = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--threaded") == 0)
            threaded_only = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsigned limit = time_limit();
    signal(SIGALRM, on_alarm);
    qsort(tests, (size_t)ntests, sizeof tests[0], by_file_then_name);
    for (int i = 0; i < ntests; i++) {
        struct timespec t0, t1;
        if (!selected(&tests[i], threaded_only, argc, argv))
            continue;
        atomic_store(&failures, 0);
        running = tests[i].name;
        alarm(limit);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        alarm(0);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (atomic_load(&failures) == 0) {
            passed++;
            printf("ok   %-48s %8.1f ms\n", tests[i].name, ms);
        } else {
            failed++;
            printf("FAIL %-48s (%s)\n", tests[i].name, tests[i].file);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
