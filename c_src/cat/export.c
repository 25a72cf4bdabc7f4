/* export.c: jsonl, chrome and folded (EXPORTS.md). */
#include "cat.h"

sink *export_sink(int format, const text_opts *o)
{
    (void)format, (void)o;
    cat_error("this format is not written by tracekit-cat yet: use tracekit_export");
    return NULL;
}
