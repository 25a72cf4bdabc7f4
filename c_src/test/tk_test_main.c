/* tk_test_main.c: runs the registered C tests.
 *
 *   tk_tests [--threaded] [SUBSTRING...]
 *
 * --threaded runs only the multi-threaded tests (the ThreadSanitizer build
 * uses it); SUBSTRINGs select tests by name. Prints one line per test and
 * ends with "N passed, N failed"; exits 1 when any test failed.
 */
#include "tk_test.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    qsort(tests, (size_t)ntests, sizeof tests[0], by_file_then_name);
    for (int i = 0; i < ntests; i++) {
        struct timespec t0, t1;
        if (!selected(&tests[i], threaded_only, argc, argv))
            continue;
        atomic_store(&failures, 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
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
