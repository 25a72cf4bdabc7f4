/* main.c: tracekit-cat, trace files read without a VM: the files of every
 * source opened, merged by time and filtered (merge.c), written as text
 * (text.c) or in dbg's file format (dbg.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "merge.h"

static int fail_with(const cat_failure *f)
{
    if (f->status == CAT_DAMAGED)
        cat_error("%s: %s at byte %llu", f->file, f->why, (unsigned long long)f->offset);
    else
        cat_error("%s: %s", f->file, f->why);
    return f->status;
}

/* --damaged skip: what was read over, one line each; a damaged status. */
static int report_skips(const cat_skips *skips)
{
    for (size_t k = 0; k < skips->n; k++) {
        const cat_skip *r = &skips->v[k];
        if (r->to_end)
            cat_error("%s: skipped from byte %llu to the end", r->file,
                      (unsigned long long)r->from);
        else
            cat_error("%s: skipped bytes %llu to %llu", r->file, (unsigned long long)r->from,
                      (unsigned long long)r->to);
    }
    return CAT_DAMAGED;
}

/* The output file. It holds message contents, so it is made new
 * (O_EXCL, mode 0600) under a hidden name beside its path, and renamed to
 * the path once written: never written through a link planted at the path
 * (a link there is replaced, not followed), never readable by others,
 * never seen half written. */
typedef struct {
    const char *path; /* NULL: standard output */
    char *tmp;        /* the hidden name while it is written */
} out_file;

/* The hidden name being written, for the signals that stop a run (^C,
 * kill, a closed terminal, a file size limit): the part written holds
 * message contents and is removed, as a failed run's is. Set and cleared
 * with those signals blocked. */
static const char *volatile written_tmp;
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ};

static void on_stop_signal(int sig)
{
    const char *tmp = written_tmp;
    if (tmp != NULL)
        unlink(tmp);
    signal(sig, SIG_DFL);
    raise(sig); /* the status of a run stopped by the signal */
}

static void block_stop_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t k = 0; k < sizeof stop_signals / sizeof *stop_signals; k++)
        sigaddset(&set, stop_signals[k]);
    sigprocmask(SIG_BLOCK, &set, old);
}

/* Removes the hidden name on the stop signals (those not ignored, as a
 * shell's background job ignores SIGINT). */
static void remove_on_stop_signals(void)
{
    for (size_t k = 0; k < sizeof stop_signals / sizeof *stop_signals; k++) {
        struct sigaction sa, was;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        if (sigaction(stop_signals[k], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
            sigaction(stop_signals[k], &sa, NULL);
    }
}

/* Opens the output: its descriptor, or -1 said on standard error. */
static int open_output(out_file *o)
{
    if (o->path == NULL)
        return 1;
    struct stat st;
    if (lstat(o->path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        cat_error("%s: not a regular file", o->path);
        return -1;
    }
    const char *slash = strrchr(o->path, '/');
    size_t dirlen = slash == NULL ? 0 : (size_t)(slash - o->path) + 1;
    static const char hidden[] = ".tracekit-cat-XXXXXX";
    o->tmp = xmalloc(dirlen + sizeof hidden);
    memcpy(o->tmp, o->path, dirlen);
    memcpy(o->tmp + dirlen, hidden, sizeof hidden);
    remove_on_stop_signals();
    sigset_t old;
    block_stop_signals(&old);
    int fd = mkstemp(o->tmp); /* O_EXCL, mode 0600 */
    if (fd >= 0)
        written_tmp = o->tmp;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        cat_error("%s: %s", o->path, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
    }
    return fd;
}

/* Closes the output: renamed to its path if what it holds stands (all
 * the events, or those before a damaged file's damage), removed otherwise.
 * The status, CAT_OUTPUT if it could not be put there. */
static int close_output(out_file *o, int fd, int status)
{
    if (o->path == NULL)
        return status;
    bool keep = status == CAT_OK || status == CAT_DAMAGED;
    if (close(fd) != 0 && keep) {
        cat_error("%s: %s", o->path, strerror(errno));
        keep = false;
        status = CAT_OUTPUT;
    }
    sigset_t old;
    block_stop_signals(&old);
    if (keep && rename(o->tmp, o->path) != 0) {
        cat_error("%s: %s", o->path, strerror(errno));
        keep = false;
        status = CAT_OUTPUT;
    }
    if (!keep)
        unlink(o->tmp);
    written_tmp = NULL;
    sigprocmask(SIG_SETMASK, &old, NULL);
    free(o->tmp);
    return status;
}

/* Whether the files are of more than one node. */
static bool several_nodes(const reader *rs, size_t n)
{
    for (size_t k = 1; k < n; k++)
        if (rs[k].node == NULL || rs[0].node == NULL || strcmp(rs[k].node, rs[0].node) != 0)
            return true;
    return false;
}

/* Reads the opened files into the output: the exit status. */
static int run(const cat_args *a, reader *rs, size_t n, int fd)
{
    output *out = xmalloc(sizeof *out);
    out_init(out, fd);
    text_sink text;
    dbg_sink dbg;
    merge m = {.args = a, .output = out};
    if (a->format == FMT_DBG) {
        dbg_sink_init(&dbg, out);
        m.out = &dbg.s;
    } else {
        text_sink_init(&text, out, &m.nm, a->depth, a->line_length, several_nodes(rs, n));
        m.out = &text.s;
    }
    cat_failure f = {0};
    int status = merge_run(&m, rs, n, &f);
    if (status != CAT_OK)
        fail_with(&f);
    if (!out_flush(out) && status == CAT_OK)
        status = CAT_OUTPUT;
    free(out);
    if (a->format != FMT_DBG)
        free(text.line.p);
    merge_free(&m);
    return status;
}

/* The files of the sources, opened with their headers read: false with
 * f set. *rs has a reader for each file (zeroed when not opened). With
 * skips (--damaged skip), damage is read over and noted there. */
static bool open_sources(const cat_args *a, char ***files, size_t *nfiles, reader **rs,
                         cat_skips *skips, cat_failure *f)
{
    size_t cap = 0;
    for (size_t k = 0; k < a->nsources; k++)
        if (!source_files(a->sources[k], files, nfiles, &cap, f))
            return false;
    *rs = xmalloc((*nfiles ? *nfiles : 1) * sizeof **rs);
    memset(*rs, 0, (*nfiles ? *nfiles : 1) * sizeof **rs);
    return readers_open(*rs, *nfiles, *files, skips, f);
}

/* The opened files into the output file (or standard output). */
static int write_output(const cat_args *a, reader *rs, size_t n)
{
    out_file o = {.path = a->output, .tmp = NULL};
    int fd = open_output(&o);
    if (fd < 0)
        return CAT_OUTPUT;
    return close_output(&o, fd, run(a, rs, n, fd));
}

int main(int argc, char **argv)
{
    cat_args a;
    if (!args_parse(argc, argv, &a)) {
        args_free(&a);
        return CAT_USAGE;
    }
    char **files = NULL;
    size_t nfiles = 0;
    reader *rs = NULL;
    cat_failure f = {0};
    cat_skips skips = {0};
    int status = open_sources(&a, &files, &nfiles, &rs, a.damaged_skip ? &skips : NULL, &f)
                     ? write_output(&a, rs, nfiles)
                     : fail_with(&f);
    if (skips.n > 0 && status == CAT_OK)
        status = report_skips(&skips);
    free(skips.v);
    for (size_t k = 0; k < nfiles; k++) {
        if (rs != NULL)
            reader_free(&rs[k]);
        free(files[k]);
    }
    free(rs);
    free(files);
    args_free(&a);
    return status;
}
