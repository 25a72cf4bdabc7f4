/* tk_limit.c: see tk_limit.h. */
#include "tk_limit.h"

#include <string.h>

#include "tk_mem.h"

int tk_limit_init(tk_limit *l, uint64_t max, uint32_t rate_n, uint64_t rate_span)
{
    memset(l, 0, sizeof *l);
    if (rate_n > TK_LIMIT_RATE_MAX)
        return -1;
    l->max = max;
    l->rate_n = rate_n;
    l->rate_span = rate_span;
    if (rate_n > 0) {
        l->window = tk_mem_alloc((size_t)rate_n * sizeof *l->window);
        if (l->window == NULL)
            return -1;
    }
    return 0;
}

void tk_limit_free(tk_limit *l)
{
    if (l->window != NULL)
        tk_mem_free(l->window);
    l->window = NULL;
}

int tk_limit_event(tk_limit *l, uint64_t t)
{
    if (l->reached != TK_LIMIT_NONE) {
        l->over++;
        return TK_LIMIT_OVER;
    }
    if (l->rate_n > 0) {
        if (l->len == l->rate_n) {
            uint64_t oldest = l->window[l->head];
            uint64_t since = t > oldest ? t - oldest : 0;
            if (since < l->rate_span) {
                l->reached = TK_LIMIT_RATE;
                l->over++;
                return TK_LIMIT_STOP;
            }
            /* The oldest leaves; this one takes its place. */
            l->window[l->head] = t;
            l->head = (l->head + 1) % l->rate_n;
        } else {
            l->window[(l->head + l->len) % l->rate_n] = t;
            l->len++;
        }
    }
    l->shown++;
    if (l->max > 0 && l->shown == l->max) {
        l->reached = TK_LIMIT_MAX;
        return TK_LIMIT_LAST;
    }
    return TK_LIMIT_SHOW;
}
