/* args.h: the command line of tracekit-cat. */
#ifndef TK_CAT_ARGS_H
#define TK_CAT_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { FMT_TEXT, FMT_DBG } cat_format;

typedef struct {
    cat_format format;
    const char *output;     /* NULL: stdout */
    int depth, line_length; /* the text's */
    /* filters: each list is OR'ed, the kinds AND'ed */
    const char **pids;
    size_t npids;
    const char **tags;
    size_t ntags;
    const char **nodes;
    size_t nnodes;
    bool has_since, has_until;
    int64_t since, until; /* ns since the epoch */
    const char **sources;
    size_t nsources;
} cat_args;

/* Parses argv; on a bad argument prints the reason and the usage to
 * stderr and returns false. --help prints the usage to stdout and exits. */
bool args_parse(int argc, char **argv, cat_args *a);
void args_free(cat_args *a);
void args_usage(FILE *to);

#endif
