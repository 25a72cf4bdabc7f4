/* tk_session.c: sessions, tracees and their flags (see tk_session.h). */
#include "tk_session_int.h"

#include "tk_mem.h"

#include <stdlib.h>
#include <string.h>

const struct tk_ses_flag_name tk_ses_flag_names[TK_SES_NFLAG_NAMES] = {
    {TK_TF_RUNNING_PROCS, "running_procs"},
    {TK_TF_RUNNING_PORTS, "running_ports"},
    {TK_TF_PORTS, "ports"},
    {TK_TF_SCHEDULER_ID, "scheduler_id"},
    {TK_TF_SILENT, "silent"},
    {TK_TF_RETURN_TO, "return_to"},
    {TK_TF_ARITY, "arity"},
    {TK_TF_GC, "garbage_collection"},
    {TK_TF_EXITING, "exiting"},
    {TK_TF_RUNNING, "running"},
    {TK_TF_SOL1, "set_on_first_link"},
    {TK_TF_SOL, "set_on_link"},
    {TK_TF_SOS1, "set_on_first_spawn"},
    {TK_TF_PROCS, "procs"},
    {TK_TF_CALL, "call"},
    {TK_TF_SOS, "set_on_spawn"},
    {TK_TF_RECEIVE, "receive"},
    {TK_TF_SEND, "send"},
    {TK_TF_MON_TS, "monotonic_timestamp"},
    {TK_TF_STRICT_MON_TS, "strict_monotonic_timestamp"},
    {TK_TF_TIMESTAMP, "timestamp"},
};

uint32_t tk_ses_flag_bit(const char *name)
{
    if (strcmp(name, "all") == 0)
        return TK_TF_ALL;
    if (strcmp(name, "cpu_timestamp") == 0)
        return TK_TF_CPU_TIMESTAMP;
    for (int i = 0; i < TK_SES_NFLAG_NAMES; i++)
        if (strcmp(name, tk_ses_flag_names[i].name) == 0)
            return tk_ses_flag_names[i].bit;
    return 0;
}

tk_ses_model *tk_ses_new(int otp_release)
{
    tk_ses_model *m = tk_mem_zalloc(sizeof *m);
    if (!m)
        return NULL;
    m->release = otp_release;
    m->nsessions = 1;
    tk_ses_session *legacy = &m->sessions[TK_SES_LEGACY];
    legacy->state = TK_SES_ALIVE;
    legacy->weak_id = -1;
    tk_ses_init_patterns_(legacy);
    return m;
}

void tk_ses_free(tk_ses_model *m)
{
    tk_mem_free(m);
}

int tk_ses_is_alive_(const tk_ses_model *m, int sid)
{
    return sid >= 0 && sid < m->nsessions &&
           m->sessions[sid].state == TK_SES_ALIVE;
}

int tk_ses_alive(const tk_ses_model *m, int sid)
{
    return tk_ses_is_alive_(m, sid);
}

uint64_t tk_ses_name(const tk_ses_model *m, int sid)
{
    return sid > 0 && sid < m->nsessions ? m->sessions[sid].name : 0;
}

uint64_t tk_ses_tracer(const tk_ses_model *m, int sid)
{
    return sid > 0 && sid < m->nsessions ? m->sessions[sid].tracer : 0;
}

long tk_ses_weak_id(const tk_ses_model *m, int sid)
{
    return sid >= 0 && sid < m->nsessions ? m->sessions[sid].weak_id : -1;
}

int tk_ses_create(tk_ses_model *m, uint64_t name, uint64_t tracer,
                  int args_ok, long *weak_id)
{
    if (!args_ok)
        return TK_SES_BADARG;
    if (m->nsessions >= TK_SES_MAX_SESSIONS)
        return TK_SES_LIMIT;
    int sid = m->nsessions++;
    tk_ses_session *s = &m->sessions[sid];
    memset(s, 0, sizeof *s);
    s->state = TK_SES_ALIVE;
    s->name = name;
    s->tracer = tracer;
    s->weak_id = m->next_weak_id++;
    tk_ses_init_patterns_(s);
    *weak_id = s->weak_id;
    return sid;
}

/* ---- refs ----------------------------------------------------------------- */

static tk_ses_tracee *tracee(tk_ses_model *m, int tid)
{
    return tid >= 0 && tid < m->ntracees ? &m->tracees[tid] : NULL;
}

static const tk_ses_tracee *ctracee(const tk_ses_model *m, int tid)
{
    return tid >= 0 && tid < m->ntracees ? &m->tracees[tid] : NULL;
}

static tk_ses_ref *find_ref(tk_ses_tracee *t, int sid)
{
    for (int i = 0; i < t->nrefs; i++)
        if (t->refs[i].sid == sid)
            return &t->refs[i];
    return NULL;
}

/* The ref of `sid' on `t', made (last in order, no flags) when missing. */
static tk_ses_ref *get_ref(tk_ses_tracee *t, int sid)
{
    tk_ses_ref *r = find_ref(t, sid);
    if (!r) {
        r = &t->refs[t->nrefs++];
        r->sid = sid;
        r->flags = 0;
    }
    return r;
}

static void delete_ref(tk_ses_tracee *t, tk_ses_ref *r)
{
    int i = (int)(r - t->refs);
    memmove(&t->refs[i], &t->refs[i + 1],
            (size_t)(t->nrefs - i - 1) * sizeof t->refs[0]);
    t->nrefs--;
}

int tk_ses_destroy(tk_ses_model *m, int sid, int by_weak_ref)
{
    if (sid <= TK_SES_LEGACY || sid >= m->nsessions)
        return TK_SES_BADARG;
    tk_ses_session *s = &m->sessions[sid];
    if (s->state != TK_SES_ALIVE)
        return by_weak_ref ? TK_SES_BADARG : 0;
    s->state = TK_SES_DEAD;
    s->new_procs = s->new_ports = 0;
    s->new_procs_tracer = s->new_ports_tracer = 0;
    tk_ses_clear_patterns_(m, sid);
    for (int t = 0; t < m->ntracees; t++) {
        tk_ses_ref *r = find_ref(&m->tracees[t], sid);
        if (r)
            delete_ref(&m->tracees[t], r);
    }
    return 1;
}

/* ---- tracees ----------------------------------------------------------------- */

static int new_tracee(tk_ses_model *m, int kind)
{
    if (m->ntracees >= TK_SES_MAX_TRACEES)
        return TK_SES_LIMIT;
    int tid = m->ntracees++;
    tk_ses_tracee *t = &m->tracees[tid];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->alive = 1;
    /* Defaults of new processes or ports: the VM walks its session list,
     * which starts with legacy and continues with the newest session. */
    for (int pass = 0; pass < 2; pass++) {
        int from = pass == 0 ? TK_SES_LEGACY : m->nsessions - 1;
        int to = pass == 0 ? TK_SES_LEGACY : 1;
        for (int sid = from; sid >= to; sid--) {
            const tk_ses_session *s = &m->sessions[sid];
            if (s->state != TK_SES_ALIVE)
                continue;
            uint32_t f = kind == TK_SES_PROC ? s->new_procs : s->new_ports;
            int has = kind == TK_SES_PROC ? s->new_procs_tracer
                                          : s->new_ports_tracer;
            if (has && (f & TK_TF_ALL))
                get_ref(t, sid)->flags = f;
        }
    }
    return tid;
}

static int live_proc(const tk_ses_model *m, int tid)
{
    const tk_ses_tracee *t = ctracee(m, tid);
    return t && t->kind == TK_SES_PROC && t->alive;
}

static void set_link(tk_ses_model *m, int a, int b, int on)
{
    if (on) {
        m->tracees[a].links |= UINT64_C(1) << b;
        m->tracees[b].links |= UINT64_C(1) << a;
    } else {
        m->tracees[a].links &= ~(UINT64_C(1) << b);
        m->tracees[b].links &= ~(UINT64_C(1) << a);
    }
}

/* The set-on-link rule, for ref `r' of the linking process: with
 * set_on_link or set_on_first_link, r's flags are added to `*into' (the
 * flags of the other process in that session); set_on_first_link then goes
 * from both, and set_on_link with it. Returns whether it applied. */
static int set_on_link(tk_ses_ref *r, uint32_t *into)
{
    if (!(r->flags & (TK_TF_SOL | TK_TF_SOL1)))
        return 0;
    *into |= r->flags & TK_TF_ALL;
    if (r->flags & TK_TF_SOL1) {
        *into &= ~(TK_TF_SOL | TK_TF_SOL1);
        r->flags &= ~(TK_TF_SOL | TK_TF_SOL1);
    }
    return 1;
}

/* link/1: the rule towards tracee `to', in r's session. */
static void link_inherit(tk_ses_ref *r, tk_ses_tracee *to)
{
    if (r->flags & (TK_TF_SOL | TK_TF_SOL1))
        (void)set_on_link(r, &get_ref(to, r->sid)->flags);
}

int tk_ses_spawn(tk_ses_model *m, int parent, int link)
{
    if (parent != TK_SES_NONE && !live_proc(m, parent))
        return TK_SES_BADARG;
    int tid = new_tracee(m, TK_SES_PROC);
    if (tid < 0 || parent == TK_SES_NONE)
        return tid;
    tk_ses_tracee *p = &m->tracees[parent], *c = &m->tracees[tid];
    for (int i = p->nrefs - 1; i >= 0; i--) {
        /* What the parent passes on in this session replaces the child's
         * defaults (also what spawn_link's link flags pass on: unlike
         * link/1, which adds to what the other process has). */
        tk_ses_ref *r = &p->refs[i];
        uint32_t cf = 0;
        int pass = 0;
        if (r->flags & TK_TF_SOS) {
            cf = r->flags & TK_TF_ALL;
            pass = 1;
        }
        if (r->flags & TK_TF_SOS1) {
            cf = r->flags & TK_TF_ALL & ~(TK_TF_SOS | TK_TF_SOS1);
            r->flags &= ~(TK_TF_SOS | TK_TF_SOS1);
            pass = 1;
        }
        if (link && set_on_link(r, &cf))
            pass = 1;
        if (pass)
            get_ref(c, r->sid)->flags = cf;
    }
    if (link)
        set_link(m, parent, tid, 1);
    return tid;
}

int tk_ses_open_port(tk_ses_model *m)
{
    return new_tracee(m, TK_SES_PORT);
}

int tk_ses_exit(tk_ses_model *m, int tid)
{
    tk_ses_tracee *t = tracee(m, tid);
    if (!t || !t->alive)
        return TK_SES_BADARG;
    t->alive = 0;
    t->nrefs = 0;
    for (int o = 0; o < m->ntracees; o++)
        if (t->links & (UINT64_C(1) << o))
            set_link(m, tid, o, 0);
    return TK_SES_OK;
}

int tk_ses_link(tk_ses_model *m, int a, int b)
{
    if (!live_proc(m, a) || !live_proc(m, b))
        return TK_SES_BADARG;
    tk_ses_tracee *ta = &m->tracees[a], *tb = &m->tracees[b];
    if (a == b || (ta->links & (UINT64_C(1) << b)))
        return TK_SES_OK;
    set_link(m, a, b, 1);
    for (int i = 0; i < ta->nrefs; i++)
        link_inherit(&ta->refs[i], tb);
    return TK_SES_OK;
}

int tk_ses_unlink(tk_ses_model *m, int a, int b)
{
    if (!live_proc(m, a) || !live_proc(m, b))
        return TK_SES_BADARG;
    if (a != b)
        set_link(m, a, b, 0);
    return TK_SES_OK;
}

int tk_ses_tracee_kind(const tk_ses_model *m, int tid)
{
    const tk_ses_tracee *t = ctracee(m, tid);
    return t ? t->kind : 0;
}

int tk_ses_tracee_alive(const tk_ses_model *m, int tid)
{
    const tk_ses_tracee *t = ctracee(m, tid);
    return t && t->alive;
}

long tk_ses_union(const tk_ses_model *m, int tid)
{
    const tk_ses_tracee *t = ctracee(m, tid);
    if (!t || !t->alive)
        return -1;
    uint32_t u = 0;
    for (int i = 0; i < t->nrefs; i++)
        u |= t->refs[i].flags;
    return (long)u;
}

/* ---- trace:process/4, trace:port/4 --------------------------------------- */

/* start_trace() of erl_bif_trace.c, for a session with a fixed tracer. */
static void start_trace(tk_ses_tracee *t, int sid, int on, uint32_t mask)
{
    tk_ses_ref *r = find_ref(t, sid);
    if (!r) {
        if (!on)
            return;
        r = get_ref(t, sid);
    }
    if (on)
        r->flags |= mask;
    else
        r->flags &= ~mask;
    if (!(r->flags & TK_TF_ALL))
        delete_ref(t, r);
}

/* The defaults for new processes or ports. Switching flags off passes no
 * tracer, and without a tracer the VM drops every default flag: any `off'
 * clears them all. */
static void change_new(uint32_t *flags, int *has_tracer, int on,
                       uint32_t mask)
{
    if (on) {
        *flags |= mask;
        *has_tracer = 1;
    } else {
        *flags &= ~mask;
        *has_tracer = 0;
    }
    if (!(*flags & TK_TF_ALL))
        *has_tracer = 0;
    if (!*has_tracer)
        *flags &= ~TK_TF_ALL;
}

int tk_ses_trace(tk_ses_model *m, int sid, int ports, int spec, int tid,
                 int how, uint32_t mask, int bad_flags, long ext_count,
                 long *count)
{
    if (sid == TK_SES_LEGACY)
        return TK_SES_LIMIT;
    if (!tk_ses_is_alive_(m, sid) || bad_flags || (how != 0 && how != 1))
        return TK_SES_BADARG;
    int cpu_ts = (mask & TK_TF_CPU_TIMESTAMP) != 0;
    mask &= TK_TF_ALL;
    int kind = ports ? TK_SES_PORT : TK_SES_PROC;
    tk_ses_session *s = &m->sessions[sid];

    switch (spec) {
    case TK_SPEC_TRACEE: {
        tk_ses_tracee *t = tracee(m, tid);
        /* trace:process/4 wants a pid, trace:port/4 a port; cpu_timestamp
         * is only accepted with the `all' the module never passes. */
        if (!t || t->kind != kind || !t->alive || cpu_ts)
            return TK_SES_BADARG;
        start_trace(t, sid, how, mask);
        *count = 1;
        return TK_SES_OK;
    }
    case TK_SPEC_ALL:
    case TK_SPEC_EXISTING:
    case TK_SPEC_NEW: {
        if (cpu_ts)
            return TK_SES_BADARG;
        uint32_t kind_flags = ports ? TK_TF_PORT_FLAGS : TK_TF_PROC_FLAGS;
        *count = 0;
        if (spec != TK_SPEC_NEW && (mask & kind_flags)) {
            /* Every live process (port) gets the whole mask. */
            for (int i = 0; i < m->ntracees; i++)
                if (m->tracees[i].kind == kind && m->tracees[i].alive)
                    start_trace(&m->tracees[i], sid, how, mask);
            *count = ext_count;
        }
        if (spec != TK_SPEC_EXISTING && (mask & kind_flags)) {
            /* The defaults keep only the flags of the kind. */
            if (ports)
                change_new(&s->new_ports, &s->new_ports_tracer, how,
                           mask & kind_flags);
            else
                change_new(&s->new_procs, &s->new_procs_tracer, how,
                           mask & kind_flags);
        }
        return TK_SES_OK;
    }
    default:
        return TK_SES_BADARG;
    }
}

/* ---- info ------------------------------------------------------------------ */

static void answer(tk_ses_answer *out, int key, int kind, uint64_t n)
{
    out->key = key;
    out->value.kind = kind;
    out->value.n = n;
    out->nitems = 0;
}

static int info_tracee(const tk_ses_model *m, int sid, int tid, int key,
                       tk_ses_answer *out)
{
    const tk_ses_tracee *t = ctracee(m, tid);
    if (!t)
        return TK_SES_BADARG;
    if (t->kind == TK_SES_PROC) {
        /* Pids: the item is checked before the process is asked. */
        if (key != TK_K_FLAGS && key != TK_K_TRACER)
            return TK_SES_BADARG;
        if (!t->alive)
            return TK_SES_UNDEFINED;
    } else {
        if (!t->alive)
            return TK_SES_UNDEFINED;
        if (key != TK_K_FLAGS && key != TK_K_TRACER)
            return TK_SES_BADARG;
    }
    const tk_ses_ref *r = NULL;
    for (int i = 0; i < t->nrefs; i++)
        if (t->refs[i].sid == sid)
            r = &t->refs[i];
    if (key == TK_K_FLAGS)
        answer(out, key, TK_V_FLAGS, r ? r->flags : 0);
    else if (r)
        answer(out, key, TK_V_TRACER, m->sessions[sid].tracer);
    else
        answer(out, key, TK_V_NIL, 0);
    return TK_SES_OK;
}

static int info_new(const tk_ses_model *m, int sid, int ports, int key,
                    tk_ses_answer *out)
{
    const tk_ses_session *s = &m->sessions[sid];
    uint32_t f = ports ? s->new_ports : s->new_procs;
    int has = ports ? s->new_ports_tracer : s->new_procs_tracer;
    if (key == TK_K_FLAGS)
        answer(out, key, TK_V_FLAGS, f);
    else if (key == TK_K_TRACER && has)
        answer(out, key, TK_V_TRACER, s->tracer);
    else if (key == TK_K_TRACER)
        answer(out, key, TK_V_NIL, 0);
    else
        return TK_SES_BADARG;
    return TK_SES_OK;
}

static int info_event(const tk_ses_model *m, int sid, int recv, int key,
                      tk_ses_answer *out)
{
    const tk_ses_session *s = &m->sessions[sid];
    int on = recv ? s->recv_on : s->send_on;
    long ms = recv ? s->recv_ms : s->send_ms;
    if (key != TK_K_MATCH_SPEC)
        return TK_SES_BADARG;
    if (!on)
        answer(out, key, TK_V_FALSE, 0);
    else if (ms > 0)
        answer(out, key, TK_V_MS, (uint64_t)ms);
    else
        answer(out, key, TK_V_TRUE, 0);
    return TK_SES_OK;
}

int tk_ses_info(const tk_ses_model *m, int sid, int what, int id, int key,
                tk_ses_answer *out)
{
    if (!tk_ses_is_alive_(m, sid))
        return TK_SES_BADARG;
    switch (what) {
    case TK_W_TRACEE:
        return info_tracee(m, sid, id, key, out);
    case TK_W_NEW_PROCS:
        return info_new(m, sid, 0, key, out);
    case TK_W_NEW_PORTS:
        return info_new(m, sid, 1, key, out);
    case TK_W_FUNC:
        return tk_ses_info_func_(m, sid, id, key, out);
    case TK_W_ON_LOAD:
        return tk_ses_info_on_load_(m, sid, key, out);
    case TK_W_SEND:
        return info_event(m, sid, 0, key, out);
    case TK_W_RECEIVE:
        return info_event(m, sid, 1, key, out);
    default:
        return TK_SES_BADARG;
    }
}

int tk_ses_session_info(const tk_ses_model *m, int what, int id, int *sids,
                        int cap, int *n)
{
    *n = 0;
    if (what == TK_W_TRACEE) {
        const tk_ses_tracee *t = ctracee(m, id);
        if (!t)
            return TK_SES_BADARG;
        if (!t->alive)
            return TK_SES_UNDEFINED;
        for (int i = 0; i < t->nrefs && *n < cap; i++)
            if (tk_ses_is_alive_(m, t->refs[i].sid))
                sids[(*n)++] = t->refs[i].sid;
        return TK_SES_OK;
    }
    if (what == TK_W_FUNC)
        return tk_ses_func_sessions_(m, id, sids, cap, n);
    if (what < TK_W_NEW_PROCS || what > TK_W_ALL || what == TK_W_FUNC)
        return TK_SES_BADARG;
    /* The session list, oldest first, legacy last. */
    for (int k = 1; k <= m->nsessions; k++) {
        int sid = k == m->nsessions ? TK_SES_LEGACY : k;
        const tk_ses_session *s = &m->sessions[sid];
        if (s->state != TK_SES_ALIVE)
            continue;
        int on;
        switch (what) {
        case TK_W_NEW_PROCS: on = s->new_procs != 0; break;
        case TK_W_NEW_PORTS: on = s->new_ports != 0; break;
        case TK_W_ON_LOAD: on = s->ol_on; break;
        case TK_W_SEND: on = s->send_on; break;
        case TK_W_RECEIVE: on = s->recv_on; break;
        default: on = 1; break;
        }
        if (on && *n < cap)
            sids[(*n)++] = sid;
    }
    return TK_SES_OK;
}
