/* procs.c: the processes the Chrome and folded exports follow: their
 * tracks' numbers, labels, registered names, and the stacks of calls not
 * yet returned from (tracekit_export's #proc{}, proc/3, split_at/4,
 * relabel/4 and receiver/2).
 *
 * Memory grows with the processes, the distinct functions and names, and
 * the calls a process has open: what the trace itself holds, as in
 * tracekit_export.
 */
#include <string.h>

#include "export.h"

proc *procs_get(procs *ps, const tree *t, const tnode *pid)
{
    sbuf *k = &ps->scratch;
    k->len = 0;
    proc_key(k, pid);
    bool added;
    uint32_t i = st_intern(&ps->keys, k->p, k->len, &added);
    if (!added)
        return &ps->v[i];
    GROW(ps->v, ps->cap, (size_t)i + 1);
    proc *p = &ps->v[i];
    memset(p, 0, sizeof *p);
    p->id = term_digest(t, pid);
    p->node = node_id(&ps->nodes, pid);
    GROW(ps->ntids, ps->ntcap, ps->nodes.n);
    while (ps->ntlen < ps->nodes.n)
        ps->ntids[ps->ntlen++] = 0;
    p->tid = ++ps->ntids[p->node];
    /* its own node's pid: always <0.N.S> */
    tt_term(&p->label, t, pid, node_str(&ps->nodes, p->node));
    p->label_base = p->label.len;
    return p;
}

uint32_t frame_of(procs *ps, const tree *t, const efield *mfa)
{
    sbuf *k = &ps->scratch;
    k->len = 0;
    tt_atom(k, deref(t, kid(t, mfa->term, 0)));
    sb_ch(k, ':');
    tt_atom(k, deref(t, kid(t, mfa->term, 1)));
    size_t mf_len = k->len;
    sb_ch(k, '/');
    arity_text(k, t, mfa);
    bool added;
    uint32_t fid = st_intern(&ps->frames, k->p, k->len, &added);
    if (added) {
        GROW(ps->fr_mf, ps->frcap, (size_t)fid + 1);
        /* fr_any has the same capacity: grown alongside */
        ps->fr_any = xrealloc(ps->fr_any, ps->frcap * sizeof *ps->fr_any);
        ps->fr_mf[fid] = st_intern(&ps->mfs, k->p, mf_len, NULL);
        ps->fr_any[fid] = k->len == mf_len + 2 && k->p[mf_len + 1] == '?';
    }
    return fid;
}

long frame_match(const procs *ps, const proc *p, uint32_t fid)
{
    uint32_t mf = ps->fr_mf[fid];
    bool any = ps->fr_any[fid];
    for (size_t i = p->depth; i > 0; i--) {
        uint32_t f = p->stack[i - 1].fid;
        if (ps->fr_mf[f] == mf && (f == fid || any || ps->fr_any[f]))
            return (long)(i - 1);
    }
    return -1;
}

void procs_register(procs *ps, proc *p, const tree *t, const tnode *name)
{
    p->label.len = p->label_base;
    sb_str(&p->label, " (");
    tt_atom(&p->label, name);
    sb_ch(&p->label, ')');
    sbuf *k = &ps->scratch;
    k->len = 0;
    atom_text(k, name);
    uint32_t r = st_intern(&ps->regs, k->p ? k->p : "", k->len, NULL);
    GROW(ps->reg_id, ps->regcap, (size_t)r + 1);
    ps->reg_id[r] = p->id;
    (void)t;
}

bool procs_receiver(procs *ps, const tree *t, const tnode *to, digest *out)
{
    to = deref(t, to);
    if (to->type == T_PID || to->type == T_PORT) {
        *out = term_digest(t, to);
        return true;
    }
    if (to->type != T_ATOM)
        return false;
    sbuf *k = &ps->scratch;
    k->len = 0;
    atom_text(k, to);
    long r = st_find(&ps->regs, k->p ? k->p : "", k->len);
    if (r < 0)
        return false;
    *out = ps->reg_id[r];
    return true;
}
