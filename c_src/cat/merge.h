/* merge.h: the merge of trace files by time, and the filters. */
#ifndef TK_CAT_MERGE_H
#define TK_CAT_MERGE_H

#include "args.h"
#include "cat.h"

typedef struct {
    const cat_args *args;
    sink *out;
    output *output;
    names nm;      /* registered in the trace: the text and --pid use them */
    tree t;        /* the tree of the event in hand */
    sbuf scratch;
    bool filtered;
} merge;

/* Hands the events of the readers to m->out, in time order, as the
 * filters of m->args keep them: CAT_OK, or the status of a damaged file
 * (f set; the events before the damage were handed on). */
int merge_run(merge *m, reader *rs, size_t n, cat_failure *f);
void merge_free(merge *m);

#endif
