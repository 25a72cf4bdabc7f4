/* tk_session_fun.c: function, on_load and send/receive patterns of the
 * trace session model (see tk_session.h). */
#include "tk_session_int.h"

#include <string.h>

uint32_t tk_ses_fflag_bit(const char *name)
{
    static const struct {
        const char *name;
        uint32_t bit;
    } names[] = {
        {"global", TK_FF_GLOBAL},    {"local", TK_FF_LOCAL},
        {"meta", TK_FF_META},        {"call_count", TK_FF_COUNT},
        {"call_time", TK_FF_TIME},   {"call_memory", TK_FF_MEMORY},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].bit;
    return 0;
}

#define FF_BREAKPOINT (TK_FF_LOCAL | TK_FF_META | TK_FF_COUNT | TK_FF_TIME | \
                       TK_FF_MEMORY)

void tk_ses_init_patterns_(tk_ses_session *s)
{
    /* Send and receive tracing are on by default in every session. */
    s->send_on = s->recv_on = 1;
    s->send_ms = s->recv_ms = 0;
    s->ol_on = 0;
    s->ol_flags = 0;
    s->ol_ms = s->ol_meta_ms = 0;
    s->ol_meta_tracer = 0;
}

int tk_ses_add_function(tk_ses_model *m, uint64_t module, uint64_t name,
                        int arity, int exported)
{
    if (m->nfuncs >= TK_SES_MAX_FUNCS)
        return TK_SES_LIMIT;
    int fid = m->nfuncs++;
    tk_ses_func *f = &m->funcs[fid];
    memset(f, 0, sizeof *f);
    f->module = module;
    f->name = name;
    f->arity = arity;
    f->exported = exported != 0;
    return fid;
}

int tk_ses_find_function(const tk_ses_model *m, uint64_t module,
                         uint64_t name, int arity)
{
    for (int i = 0; i < m->nfuncs; i++) {
        const tk_ses_func *f = &m->funcs[i];
        if (f->module == module && f->name == name && f->arity == arity)
            return i;
    }
    return -1;
}

/* ---- breakpoints ------------------------------------------------------------ */

static tk_ses_bp *make_bp(tk_ses_model *m, tk_ses_bp *bp)
{
    if (!bp->present) {
        memset(bp, 0, sizeof *bp);
        bp->present = 1;
        bp->stamp = ++m->next_stamp;
    }
    return bp;
}

/* A breakpoint with no flags left is removed (and a later one is made
 * anew, last in the function's order). */
static void tidy_bp(tk_ses_bp *bp)
{
    if (bp->present && bp->flags == 0)
        bp->present = 0;
}

/* call_count, call_time, call_memory. `on' 1 starts the counter from zero.
 * restart and pause do nothing where the session has no breakpoint on the
 * function; on a breakpoint with the counter, restart zeroes and activates
 * it and pause deactivates it; on a breakpoint without it (say, local
 * only), both start it like `on' 1. */
static void set_counter(tk_ses_model *m, tk_ses_bp *bp, long on,
                        unsigned flag, unsigned active)
{
    if (on != 1 && !bp->present)
        return;
    if (on == TK_MS_PAUSE && (bp->flags & flag)) {
        bp->flags &= ~active;
        return;
    }
    make_bp(m, bp);
    bp->flags |= flag | active;
    if (flag == TK_BP_COUNT)
        bp->count = 0;
}

static int mfa_matches(const tk_ses_func *f, const tk_ses_mfa *p)
{
    return (p->module_wild || f->module == p->module) &&
           (p->name_wild || f->name == p->name) &&
           (p->arity_wild || f->arity == p->arity);
}

/* erts_set_trace_pattern() for one session. `on' is 1, 0, TK_MS_RESTART
 * or TK_MS_PAUSE; `ms' the match spec key (0: none). */
static long set_pattern(tk_ses_model *m, int sid, const tk_ses_mfa *pat,
                        long on, long ms, uint32_t ff)
{
    int bp_flags = (ff & FF_BREAKPOINT) != 0;
    long n_exports = 0, n_funcs = 0;
    for (int i = 0; i < m->nfuncs; i++) {
        tk_ses_func *f = &m->funcs[i];
        if (!mfa_matches(f, pat))
            continue;
        n_funcs++;
        tk_ses_bp *ex = &f->export[sid], *bp = &f->code[sid];
        if (f->exported) {
            n_exports++;
            if (on && !bp_flags) {
                /* Global tracing on, restart and pause alike. */
                make_bp(m, ex)->ms = ms;
            } else if (!(!on && bp_flags)) {
                /* Global off, or breakpoint tracing on: no global. */
                ex->present = 0;
            }
        }
        if (on && !bp_flags) {
            bp->present = 0; /* all breakpoints of the session go */
            continue;
        }
        if (on) {
            if (ff & TK_FF_LOCAL) {
                make_bp(m, bp)->flags |= TK_BP_LOCAL;
                bp->ms = ms;
            }
            if (ff & TK_FF_META) {
                make_bp(m, bp)->flags |= TK_BP_META;
                bp->meta_ms = ms;
            }
            if (ff & TK_FF_COUNT)
                set_counter(m, bp, on, TK_BP_COUNT, TK_BP_COUNT_ACTIVE);
            if (ff & TK_FF_TIME)
                set_counter(m, bp, on, TK_BP_TIME, TK_BP_TIME_ACTIVE);
            if (ff & TK_FF_MEMORY)
                set_counter(m, bp, on, TK_BP_MEM, TK_BP_MEM_ACTIVE);
        } else if (bp->present) {
            if (ff & TK_FF_LOCAL) {
                bp->flags &= ~TK_BP_LOCAL;
                bp->ms = 0;
            }
            if (ff & TK_FF_META) {
                bp->flags &= ~TK_BP_META;
                bp->meta_ms = 0;
            }
            if (ff & TK_FF_COUNT)
                bp->flags &= ~(TK_BP_COUNT | TK_BP_COUNT_ACTIVE);
            if (ff & TK_FF_TIME)
                bp->flags &= ~(TK_BP_TIME | TK_BP_TIME_ACTIVE);
            if (ff & TK_FF_MEMORY)
                bp->flags &= ~(TK_BP_MEM | TK_BP_MEM_ACTIVE);
        }
        tidy_bp(bp);
    }
    return bp_flags ? n_funcs : n_exports;
}

/* change_on_load_trace_pattern() of erl_bif_trace.c. */
static void change_on_load(tk_ses_session *s, long on, long ms, uint32_t ff)
{
    unsigned f = 0;
    if (ff & FF_BREAKPOINT)
        f |= TK_OL_BREAKPOINT;
    if (ff & TK_FF_LOCAL)
        f |= TK_OL_LOCAL;
    if (ff & TK_FF_META)
        f |= TK_OL_META;
    if (ff & TK_FF_COUNT)
        f |= TK_OL_COUNT;
    if (ff & TK_FF_TIME)
        f |= TK_OL_TIME;
    if (ff & TK_FF_MEMORY)
        f |= TK_OL_MEMORY;
    const unsigned counters = TK_OL_COUNT | TK_OL_TIME | TK_OL_MEMORY;
    const unsigned kinds = TK_OL_LOCAL | TK_OL_META | counters;

    if ((f & TK_OL_LOCAL) || !(f & TK_OL_BREAKPOINT))
        s->ol_ms = ms;
    if (f & TK_OL_META) {
        s->ol_meta_ms = ms;
        s->ol_meta_tracer = 1;
    } else if (!(f & TK_OL_BREAKPOINT)) {
        s->ol_meta_ms = 0;
        s->ol_meta_tracer = 0;
    }

    int old_bp = (s->ol_flags & TK_OL_BREAKPOINT) != 0;
    int new_bp = (f & TK_OL_BREAKPOINT) != 0;
    if (old_bp && new_bp) {
        if (on) {
            s->ol_flags |= f & (TK_OL_LOCAL | TK_OL_META);
            if (on == 1)
                s->ol_flags |= f & counters;
        } else {
            s->ol_flags &= ~(f & kinds);
            if (!(s->ol_flags & kinds)) {
                s->ol_flags &= ~TK_OL_BREAKPOINT;
                s->ol_on = 0;
            }
        }
    } else if (!old_bp && !new_bp) {
        s->ol_on = on != 0;
    } else if (old_bp && !new_bp) {
        if (on) {
            s->ol_flags = f;
            s->ol_on = 1;
        }
    } else if (on) {
        if (on != 1)
            f &= ~counters;
        f &= ~TK_OL_BREAKPOINT;
        if (f & kinds)
            f |= TK_OL_BREAKPOINT;
        s->ol_flags = f;
        s->ol_on = (f & TK_OL_BREAKPOINT) != 0;
    }
}

int tk_ses_function(tk_ses_model *m, int sid, int target,
                    const tk_ses_mfa *pat, long ms, uint32_t fflags,
                    int bad_flags, long *matches)
{
    if (sid == TK_SES_LEGACY)
        return TK_SES_LIMIT;
    if (!tk_ses_is_alive_(m, sid) || bad_flags)
        return TK_SES_BADARG;
    int global = (fflags & TK_FF_GLOBAL) != 0;
    int bp_flags = (fflags & FF_BREAKPOINT) != 0;
    if (global && bp_flags)
        return TK_SES_BADARG;

    long on, prog = 0;
    switch (ms) {
    case TK_MS_FALSE: on = 0; break;
    case TK_MS_TRUE: on = 1; break;
    case TK_MS_RESTART: on = TK_MS_RESTART; break;
    case TK_MS_PAUSE: on = TK_MS_PAUSE; break;
    case TK_MS_BAD: return TK_SES_BADARG;
    default:
        if (ms <= 0)
            return TK_SES_BADARG;
        on = 1;
        prog = ms;
        break;
    }
    /* A match spec with only call_count/call_time/call_memory. */
    if (prog && !(fflags & (TK_FF_LOCAL | TK_FF_META)) &&
        (fflags & (TK_FF_COUNT | TK_FF_TIME | TK_FF_MEMORY)))
        return TK_SES_BADARG;

    tk_ses_session *s = &m->sessions[sid];
    switch (target) {
    case TK_FT_ON_LOAD:
        change_on_load(s, on, prog, fflags);
        *matches = 0;
        return TK_SES_OK;
    case TK_FT_MFA:
        if (!pat)
            return TK_SES_BADARG;
        /* Once a part is '_', the following parts must be too. */
        if ((pat->module_wild && !pat->name_wild) ||
            (pat->name_wild && !pat->arity_wild))
            return TK_SES_BADARG;
        *matches = set_pattern(m, sid, pat, on, prog, fflags);
        return TK_SES_OK;
    case TK_FT_SEND:
    case TK_FT_RECEIVE:
        if (global || bp_flags || (on != 0 && on != 1))
            return TK_SES_BADARG;
        if (target == TK_FT_SEND) {
            s->send_on = on != 0;
            s->send_ms = on ? prog : 0;
        } else {
            s->recv_on = on != 0;
            s->recv_ms = on ? prog : 0;
        }
        *matches = 1;
        return TK_SES_OK;
    default:
        return TK_SES_BADARG;
    }
}

int tk_ses_call(tk_ses_model *m, int fid)
{
    if (fid < 0 || fid >= m->nfuncs)
        return TK_SES_BADARG;
    tk_ses_func *f = &m->funcs[fid];
    for (int sid = 0; sid < m->nsessions; sid++) {
        tk_ses_bp *bp = &f->code[sid];
        if (tk_ses_is_alive_(m, sid) && bp->present &&
            (bp->flags & TK_BP_COUNT_ACTIVE))
            bp->count++;
    }
    return TK_SES_OK;
}

void tk_ses_clear_patterns_(tk_ses_model *m, int sid)
{
    for (int i = 0; i < m->nfuncs; i++) {
        m->funcs[i].code[sid].present = 0;
        m->funcs[i].export[sid].present = 0;
    }
    tk_ses_session *s = &m->sessions[sid];
    tk_ses_init_patterns_(s);
    s->send_on = s->recv_on = 0;
}

/* ---- info ---------------------------------------------------------------- */

static void set_value(tk_ses_value *v, int kind, uint64_t n)
{
    v->kind = kind;
    v->n = n;
}

static void ms_value(tk_ses_value *v, long ms)
{
    if (ms > 0)
        set_value(v, TK_V_MS, (uint64_t)ms);
    else
        set_value(v, TK_V_NIL, 0);
}

static int valid_func_key(int key)
{
    return key >= TK_K_TRACED && key <= TK_K_ALL;
}

/* The answers to the single function items of trace:info/3. */
typedef struct {
    tk_ses_value traced, ms, meta, meta_ms, count, time, mem;
} fn_items;

/* Answers a single item from `v'; 0 when `key' is not one of them. */
static int one_item(int key, const fn_items *v, tk_ses_answer *out)
{
    switch (key) {
    case TK_K_TRACED: out->value = v->traced; return 1;
    case TK_K_MATCH_SPEC: out->value = v->ms; return 1;
    case TK_K_META: out->value = v->meta; return 1;
    case TK_K_META_MATCH_SPEC: out->value = v->meta_ms; return 1;
    case TK_K_CALL_COUNT: out->value = v->count; return 1;
    case TK_K_CALL_TIME: out->value = v->time; return 1;
    case TK_K_CALL_MEMORY: out->value = v->mem; return 1;
    default: return 0;
    }
}

/* An `all' answer: the list keys[i] -> vals[i]. */
static void fill_items(tk_ses_answer *out, const int *keys,
                       const tk_ses_value *vals, int n)
{
    set_value(&out->value, TK_V_NIL, 0);
    out->nitems = n;
    for (int i = 0; i < n; i++) {
        out->items[i].key = keys[i];
        out->items[i].value = vals[i];
    }
}

int tk_ses_info_func_(const tk_ses_model *m, int sid, int fid, int key,
                      tk_ses_answer *out)
{
    out->key = key;
    out->nitems = 0;
    /* OTP 29 checks the item first; earlier releases answer
     * {Item, undefined | false} for unknown and untraced functions
     * whatever the item. */
    if (m->release >= 29 && !valid_func_key(key))
        return TK_SES_BADARG;
    if (fid < 0 || fid >= m->nfuncs) {
        set_value(&out->value, TK_V_UNDEFINED, 0);
        return TK_SES_OK;
    }
    const tk_ses_func *f = &m->funcs[fid];
    const tk_ses_bp *ex = &f->export[sid], *bp = &f->code[sid];
    int global = f->exported && ex->present;
    unsigned fl = global || !bp->present ? 0 : bp->flags;
    if (!global && !(fl & (TK_BP_LOCAL | TK_BP_META | TK_BP_COUNT |
                           TK_BP_TIME | TK_BP_MEM))) {
        set_value(&out->value, TK_V_FALSE, 0);
        return TK_SES_OK;
    }
    if (!valid_func_key(key))
        return TK_SES_BADARG;

    fn_items v;
    tk_ses_value meta_all;
    if (global) {
        set_value(&v.traced, TK_V_GLOBAL, 0);
        ms_value(&v.ms, ex->ms);
    } else if (fl & TK_BP_LOCAL) {
        set_value(&v.traced, TK_V_LOCAL, 0);
        ms_value(&v.ms, bp->ms);
    } else {
        set_value(&v.traced, TK_V_FALSE, 0);
        set_value(&v.ms, TK_V_FALSE, 0);
    }
    if (fl & TK_BP_META) {
        set_value(&v.meta, TK_V_TRACER, m->sessions[sid].tracer);
        meta_all = v.meta;
        ms_value(&v.meta_ms, bp->meta_ms);
    } else {
        /* Asked alone, `meta' of a traced function without meta tracing
         * was [] before OTP 29 and is false since; within `all' it is
         * false in both. */
        set_value(&v.meta, m->release >= 29 ? TK_V_FALSE : TK_V_NIL, 0);
        set_value(&meta_all, TK_V_FALSE, 0);
        set_value(&v.meta_ms, TK_V_FALSE, 0);
    }
    if (fl & TK_BP_COUNT)
        set_value(&v.count, TK_V_INT, (uint64_t)bp->count);
    else
        set_value(&v.count, TK_V_FALSE, 0);
    set_value(&v.time, fl & TK_BP_TIME ? TK_V_CALL_DATA : TK_V_FALSE, 0);
    set_value(&v.mem, fl & TK_BP_MEM ? TK_V_CALL_DATA : TK_V_FALSE, 0);

    if (!one_item(key, &v, out)) { /* `all' (the key is valid) */
        static const int keys[7] = {
            TK_K_TRACED, TK_K_MATCH_SPEC, TK_K_META, TK_K_META_MATCH_SPEC,
            TK_K_CALL_MEMORY, TK_K_CALL_TIME, TK_K_CALL_COUNT};
        const tk_ses_value vals[7] = {v.traced, v.ms, meta_all, v.meta_ms,
                                      v.mem, v.time, v.count};
        fill_items(out, keys, vals, 7);
    }
    return TK_SES_OK;
}

int tk_ses_info_on_load_(const tk_ses_model *m, int sid, int key,
                         tk_ses_answer *out)
{
    const tk_ses_session *s = &m->sessions[sid];
    unsigned f = s->ol_flags;
    int bp = (f & TK_OL_BREAKPOINT) != 0;
    out->key = key;
    out->nitems = 0;
    /* Off: {Item, false} whatever the item. */
    if (!s->ol_on) {
        set_value(&out->value, TK_V_FALSE, 0);
        return TK_SES_OK;
    }
    fn_items v;
    set_value(&v.traced, !bp ? TK_V_GLOBAL
                             : (f & TK_OL_LOCAL) ? TK_V_LOCAL : TK_V_FALSE, 0);
    if (!bp || (f & TK_OL_LOCAL))
        ms_value(&v.ms, s->ol_ms);
    else
        set_value(&v.ms, TK_V_FALSE, 0);
    if ((f & TK_OL_META) && s->ol_meta_tracer)
        set_value(&v.meta, TK_V_TRACER, s->tracer);
    else
        set_value(&v.meta, TK_V_FALSE, 0);
    if (f & TK_OL_META)
        ms_value(&v.meta_ms, s->ol_meta_ms);
    else
        set_value(&v.meta_ms, TK_V_FALSE, 0);
    set_value(&v.count, f & TK_OL_COUNT ? TK_V_TRUE : TK_V_FALSE, 0);
    set_value(&v.time, f & TK_OL_TIME ? TK_V_TRUE : TK_V_FALSE, 0);
    set_value(&v.mem, f & TK_OL_MEMORY ? TK_V_TRUE : TK_V_FALSE, 0);

    if (one_item(key, &v, out))
        return TK_SES_OK;
    if (key != TK_K_ALL)
        return TK_SES_BADARG;
    /* `all' shows a stored match spec even where `match_spec' alone
     * says false, and a stored meta match spec likewise. */
    tk_ses_value all_ms, all_meta_ms;
    if ((f & TK_OL_LOCAL) || !bp)
        set_value(&all_ms, TK_V_NIL, 0);
    else
        set_value(&all_ms, TK_V_FALSE, 0);
    if (s->ol_ms > 0)
        set_value(&all_ms, TK_V_MS, (uint64_t)s->ol_ms);
    if (f & TK_OL_META)
        set_value(&all_meta_ms, TK_V_NIL, 0);
    else
        set_value(&all_meta_ms, TK_V_FALSE, 0);
    if (s->ol_meta_ms > 0)
        set_value(&all_meta_ms, TK_V_MS, (uint64_t)s->ol_meta_ms);
    static const int keys[5] = {TK_K_TRACED, TK_K_MATCH_SPEC, TK_K_META,
                                TK_K_META_MATCH_SPEC, TK_K_CALL_COUNT};
    const tk_ses_value vals[5] = {v.traced, all_ms, v.meta, all_meta_ms,
                                  v.count};
    fill_items(out, keys, vals, 5);
    return TK_SES_OK;
}

int tk_ses_func_sessions_(const tk_ses_model *m, int fid, int *sids, int cap,
                          int *n)
{
    *n = 0;
    if (fid < 0 || fid >= m->nfuncs)
        return TK_SES_UNDEFINED;
    const tk_ses_func *f = &m->funcs[fid];
    /* Sessions with breakpoints in the code first, then those tracing
     * globally, each in the order their breakpoints were made. */
    for (int part = 0; part < 2; part++) {
        const tk_ses_bp *bps = part == 0 ? f->code : f->export;
        unsigned long last = 0;
        for (;;) {
            int best = -1;
            for (int sid = 0; sid < m->nsessions; sid++) {
                const tk_ses_bp *bp = &bps[sid];
                if (!bp->present || bp->stamp <= last ||
                    !tk_ses_is_alive_(m, sid))
                    continue;
                if (part == 1 && !f->exported)
                    continue;
                if (best < 0 || bp->stamp < bps[best].stamp)
                    best = sid;
            }
            if (best < 0)
                break;
            last = bps[best].stamp;
            if (*n < cap)
                sids[(*n)++] = best;
        }
    }
    return TK_SES_OK;
}
