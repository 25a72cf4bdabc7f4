/* main.c: tracekit-cat, trace files read without a VM: the files of every
 * source opened, merged by time and filtered (merge.c), written as text
 * (text.c) or in dbg's file format (dbg.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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

/* The output file (or standard output): its descriptor, or -1. */
static int open_output(const cat_args *a)
{
    if (a->output == NULL)
        return 1;
    int fd = open(a->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        cat_error("%s: %s", a->output, strerror(errno));
    return fd;
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
 * f set. *rs has a reader for each file (zeroed when not opened). */
static bool open_sources(const cat_args *a, char ***files, size_t *nfiles, reader **rs,
                         cat_failure *f)
{
    size_t cap = 0;
    for (size_t k = 0; k < a->nsources; k++)
        if (!source_files(a->sources[k], files, nfiles, &cap, f))
            return false;
    *rs = xmalloc((*nfiles ? *nfiles : 1) * sizeof **rs);
    memset(*rs, 0, (*nfiles ? *nfiles : 1) * sizeof **rs);
    return readers_open(*rs, *nfiles, *files, f);
}

/* The opened files into the output file (or standard output). */
static int write_output(const cat_args *a, reader *rs, size_t n)
{
    int fd = open_output(a);
    if (fd < 0)
        return CAT_OUTPUT;
    int status = run(a, rs, n, fd);
    if (fd != 1 && close(fd) != 0 && status == CAT_OK) {
        cat_error("%s: %s", a->output, strerror(errno));
        status = CAT_OUTPUT;
    }
    return status;
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
    int status = open_sources(&a, &files, &nfiles, &rs, &f) ? write_output(&a, rs, nfiles)
                                                            : fail_with(&f);
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
