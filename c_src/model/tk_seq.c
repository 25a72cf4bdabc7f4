/* tk_seq.c: the seq_trace model. Each rule names the VM behaviour it
 * mirrors (erl_bif_trace.c, erl_trace.c, erl_message.c and the receive
 * instruction of the emulator, as observed on OTP 27 and 29). */
#include "tk_seq.h"

#include <string.h>

#include "tk_mem.h"

typedef struct {
    bool alive;
    tk_seq_token token;
    uint64_t clock;   /* p->seq_trace_clock */
    uint64_t lastcnt; /* p->seq_trace_lastcnt */
    uint32_t *links;  /* linked processes, in the order the links were made */
    size_t nlinks, caplinks;
} proc;

typedef struct {
    uint32_t id; /* 1, 2, ...; index + 1 in the message array */
    uint32_t from, to;
    tk_seq_msg_kind kind;
    uint64_t content;
    tk_seq_carry carry;
    tk_seq_token token;
    bool queued; /* still in `to`'s queue */
} msg;

struct tk_seq_world {
    tk_seq_tracer tracer;
    proc *procs;
    size_t nprocs, capprocs;
    msg *msgs;
    size_t nmsgs, capmsgs; /* in sending order, which is queue order */
    tk_seq_event *events;
    size_t nevents, capevents;
};

tk_seq_ts tk_seq_ts_of(unsigned flags)
{
    /* Precedence when several are set (all are remembered in the token):
     * timestamp > strict_monotonic_timestamp > monotonic_timestamp. */
    if (flags & TK_SEQ_TIMESTAMP)
        return TK_SEQ_TS_TIMESTAMP;
    if (flags & TK_SEQ_STRICT_MONOTONIC)
        return TK_SEQ_TS_STRICT_MONOTONIC;
    if (flags & TK_SEQ_MONOTONIC)
        return TK_SEQ_TS_MONOTONIC;
    return TK_SEQ_TS_NONE;
}

/* ---- storage ---------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *n = tk_mem_realloc(*arr, *cap * elem, ncap * elem);
    if (n == NULL)
        return -1;
    *arr = n;
    *cap = ncap;
    return 0;
}

static void release(void *p)
{
    if (p != NULL)
        tk_mem_free(p);
}

tk_seq_world *tk_seq_world_new(tk_seq_tracer tracer)
{
    tk_seq_world *w = tk_mem_zalloc(sizeof *w);
    if (w != NULL)
        w->tracer = tracer;
    return w;
}

void tk_seq_world_free(tk_seq_world *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->nprocs; i++)
        release(w->procs[i].links);
    release(w->procs);
    release(w->msgs);
    release(w->events);
    tk_mem_free(w);
}

void tk_seq_set_tracer(tk_seq_world *w, tk_seq_tracer tracer)
{
    w->tracer = tracer;
}

tk_seq_tracer tk_seq_get_tracer(const tk_seq_world *w)
{
    return w->tracer;
}

int tk_seq_proc_new(tk_seq_world *w, uint32_t *id)
{
    if (w->nprocs >= UINT32_MAX - 1 ||
        grow((void **)&w->procs, &w->capprocs, w->nprocs + 1, sizeof(proc)))
        return TK_SEQ_NOMEM;
    proc *p = &w->procs[w->nprocs];
    memset(p, 0, sizeof *p);
    p->alive = true; /* no token, clock 0, lastcnt 0 */
    *id = (uint32_t)w->nprocs++;
    return TK_SEQ_OK;
}

size_t tk_seq_proc_count(const tk_seq_world *w)
{
    return w->nprocs;
}

static proc *live(const tk_seq_world *w, uint32_t id)
{
    if (id >= w->nprocs || !w->procs[id].alive)
        return NULL;
    return &w->procs[id];
}

bool tk_seq_proc_alive(const tk_seq_world *w, uint32_t id)
{
    return live(w, id) != NULL;
}

int tk_seq_counters(const tk_seq_world *w, uint32_t id, uint64_t *clock,
                    uint64_t *lastcnt)
{
    const proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    *clock = p->clock;
    *lastcnt = p->lastcnt;
    return TK_SEQ_OK;
}

/* ---- the VM's token helpers ---------------------------------------------- */

/* new_seq_trace_token(): a process without token gets
 * {0, 0, 0, Self, LastCnt}; its lastcnt survives an empty token. */
static void ensure_token(proc *p, uint32_t self)
{
    if (p->token.present)
        return;
    p->token.present = true;
    p->token.flags = 0;
    p->token.label = 0;
    p->token.serial = 0;
    p->token.from = self;
    p->token.lastcnt = tk_small_of_word(p->lastcnt);
}

/* seq_trace_update_serial(): before each outgoing transfer (send, exit
 * signal, spawn request/reply) and each print. With no token, or when a
 * system seq tracer exists and its enabled/3 does not answer trace,
 * nothing changes. Otherwise clock += 1 and the token becomes
 * {Flags, Label, clock, Self, lastcnt}. No system tracer at all still
 * advances the serial. */
static void update_serial(tk_seq_world *w, proc *p, uint32_t self)
{
    if (!p->token.present || w->tracer == TK_SEQ_TRACER_REFUSE)
        return;
    p->token.from = self;
    p->clock += 1;
    p->token.serial = tk_small_of_word(p->clock);
    p->token.lastcnt = tk_small_of_word(p->lastcnt);
}

/* seq_trace_output_generic(): an event is made when the token is present,
 * a system tracer exists and answers trace, and the token has the flag of
 * the event's kind. The event shows the token it is made from. */
static int output(tk_seq_world *w, const tk_seq_token *t, unsigned kind_flag,
                  tk_seq_ev_kind kind, uint32_t to, tk_seq_msg_kind mkind,
                  uint64_t content, uint32_t msg_from)
{
    if (!t->present || w->tracer != TK_SEQ_TRACER_ACCEPT ||
        (t->flags & kind_flag) == 0)
        return TK_SEQ_OK;
    if (grow((void **)&w->events, &w->capevents, w->nevents + 1,
             sizeof(tk_seq_event)))
        return TK_SEQ_NOMEM;
    w->events[w->nevents++] = (tk_seq_event){
        .kind = kind,
        .label = t->label,
        .lastcnt = t->lastcnt,
        .serial = t->serial,
        .from = t->from,
        .to = to,
        .msg_kind = mkind,
        .content = content,
        .msg_from = msg_from,
        .ts = tk_seq_ts_of(t->flags),
    };
    return TK_SEQ_OK;
}

/* A message is queued for `to` carrying a copy of `t` (or [] when absent). */
static int enqueue(tk_seq_world *w, uint32_t from, uint32_t to,
                   tk_seq_msg_kind kind, uint64_t content, tk_seq_carry carry,
                   const tk_seq_token *t, uint32_t *id)
{
    if (w->nmsgs >= UINT32_MAX - 1 ||
        grow((void **)&w->msgs, &w->capmsgs, w->nmsgs + 1, sizeof(msg)))
        return TK_SEQ_NOMEM;
    msg *m = &w->msgs[w->nmsgs];
    memset(m, 0, sizeof *m);
    m->id = (uint32_t)(w->nmsgs + 1);
    m->from = from;
    m->to = to;
    m->kind = kind;
    m->content = content;
    m->carry = carry;
    if (carry == TK_SEQ_CARRY_TOKEN)
        m->token = *t;
    m->queued = true;
    w->nmsgs++;
    if (id != NULL)
        *id = m->id;
    return TK_SEQ_OK;
}

/* The receive instruction (remove_message): a message carrying [] empties
 * the receiver's token; one carrying a token T installs T, sets
 * lastcnt = T.serial and raises the clock to T.serial if below, then
 * reports a receive event made from T; a message with no token
 * information changes nothing. */
static int receive_msg(tk_seq_world *w, proc *p, uint32_t self, const msg *m)
{
    switch (m->carry) {
    case TK_SEQ_CARRY_EMPTY:
        p->token.present = false;
        return TK_SEQ_OK;
    case TK_SEQ_CARRY_NONE:
        return TK_SEQ_OK;
    case TK_SEQ_CARRY_TOKEN:
        break;
    }
    uint64_t s = tk_small_unsigned(m->token.serial);
    p->token = m->token;
    p->lastcnt = s;
    if (p->clock < s)
        p->clock = s;
    return output(w, &p->token, TK_SEQ_RECEIVE, TK_SEQ_EV_RECEIVE, self,
                  m->kind, m->content, m->kind == TK_SEQ_MSG_EXIT ? m->from : 0);
}

/* ---- set_token / get_token ----------------------------------------------- */

static bool is_flag(unsigned flag)
{
    return flag != 0 && (flag & (flag - 1)) == 0 && (flag & TK_SEQ_ALL_FLAGS);
}

int tk_seq_set_flag(tk_seq_world *w, uint32_t id, unsigned flag, bool on,
                    bool *old)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    if (!is_flag(flag))
        return TK_SEQ_BADARG;
    ensure_token(p, id);
    if (old != NULL)
        *old = (p->token.flags & flag) != 0;
    if (on)
        p->token.flags |= flag;
    else
        p->token.flags &= ~flag;
    return TK_SEQ_OK;
}

int tk_seq_set_label(tk_seq_world *w, uint32_t id, uint32_t label,
                     uint32_t *old)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    ensure_token(p, id);
    if (old != NULL)
        *old = p->token.label;
    p->token.label = label;
    return TK_SEQ_OK;
}

int tk_seq_set_serial(tk_seq_world *w, uint32_t id, int64_t prev, int64_t cur,
                      int64_t *old_prev, int64_t *old_cur)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    /* Both must be small integers; checked before any token is made. */
    if (!tk_small_fits(prev) || !tk_small_fits(cur))
        return TK_SEQ_BADARG;
    ensure_token(p, id);
    if (old_prev != NULL)
        *old_prev = p->token.lastcnt;
    if (old_cur != NULL)
        *old_cur = p->token.serial;
    p->token.lastcnt = prev;
    p->token.serial = cur;
    /* The counters take the unsigned values: -1 becomes 2^60 - 1. */
    p->clock = tk_small_unsigned(cur);
    p->lastcnt = tk_small_unsigned(prev);
    return TK_SEQ_OK;
}

int tk_seq_clear_token(tk_seq_world *w, uint32_t id, tk_seq_token *old)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    if (old != NULL)
        *old = p->token;
    /* Only the token goes: clock and lastcnt stay. */
    p->token.present = false;
    return TK_SEQ_OK;
}

int tk_seq_set_token(tk_seq_world *w, uint32_t id, unsigned flags,
                     uint32_t label, int64_t serial, int64_t lastcnt)
{
    static const unsigned order[] = {TK_SEQ_PRINT, TK_SEQ_SEND,
                                     TK_SEQ_RECEIVE, TK_SEQ_TIMESTAMP,
                                     TK_SEQ_STRICT_MONOTONIC,
                                     TK_SEQ_MONOTONIC};
    int rc = tk_seq_set_label(w, id, label, NULL);
    if (rc != TK_SEQ_OK)
        return rc;
    rc = tk_seq_set_serial(w, id, lastcnt, serial, NULL, NULL);
    if (rc != TK_SEQ_OK)
        return rc; /* badarg, label already set */
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        (void)tk_seq_set_flag(w, id, order[i], (flags & order[i]) != 0, NULL);
    return TK_SEQ_OK;
}

int tk_seq_get_token(const tk_seq_world *w, uint32_t id, tk_seq_token *out)
{
    const proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    *out = p->token;
    return TK_SEQ_OK;
}

int tk_seq_get_component(const tk_seq_world *w, uint32_t id, unsigned comp,
                         tk_seq_answer *out)
{
    const proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    memset(out, 0, sizeof *out);
    if (!p->token.present) {
        /* erl_seq_trace_info() without a token: flags and spawn are
         * {Item, false}, label and serial are []. */
        if (is_flag(comp) || comp == TK_SEQ_COMP_SPAWN) {
            out->kind = TK_SEQ_ANS_BOOL;
            out->flag = false;
            return TK_SEQ_OK;
        }
        if (comp == TK_SEQ_COMP_LABEL || comp == TK_SEQ_COMP_SERIAL) {
            out->kind = TK_SEQ_ANS_NIL;
            return TK_SEQ_OK;
        }
        return TK_SEQ_BADARG;
    }
    if (is_flag(comp)) {
        out->kind = TK_SEQ_ANS_BOOL;
        out->flag = (p->token.flags & comp) != 0;
    } else if (comp == TK_SEQ_COMP_LABEL) {
        out->kind = TK_SEQ_ANS_LABEL;
        out->label = p->token.label;
    } else if (comp == TK_SEQ_COMP_SERIAL) {
        out->kind = TK_SEQ_ANS_SERIAL;
        out->lastcnt = p->token.lastcnt;
        out->serial = p->token.serial;
    } else {
        /* spawn is known only on the no-token path: badarg here. */
        return TK_SEQ_BADARG;
    }
    return TK_SEQ_OK;
}

/* ---- events of the processes --------------------------------------------- */

int tk_seq_print(tk_seq_world *w, uint32_t id, const uint32_t *label,
                 uint64_t info, bool *passed)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    *passed = false;
    /* seq_trace_print_1/2: false without a token, and for print/2 when the
     * label is not exactly the token's. */
    if (!p->token.present || (label != NULL && *label != p->token.label))
        return TK_SEQ_OK;
    /* Otherwise the serial advances whether or not the print flag is set;
     * the flag only decides the event. */
    *passed = true;
    update_serial(w, p, id);
    return output(w, &p->token, TK_SEQ_PRINT, TK_SEQ_EV_PRINT, TK_SEQ_NOBODY,
                  TK_SEQ_MSG_PRINT, info, 0);
}

int tk_seq_send(tk_seq_world *w, uint32_t from, uint32_t to, uint64_t content,
                uint32_t *msgid)
{
    proc *p = live(w, from);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    *msgid = 0;
    /* erl_send() looks the receiver up first: a send to a dead local
     * process never reaches erts_send_message(), so no serial, no event. */
    if (to >= w->nprocs)
        return TK_SEQ_NOPROC;
    if (!w->procs[to].alive)
        return TK_SEQ_OK;
    /* erts_send_message(): with a token, update the serial, report the
     * send, and copy the (updated) token into the message; without one
     * the message carries []. */
    if (p->token.present) {
        update_serial(w, p, from);
        int rc = output(w, &p->token, TK_SEQ_SEND, TK_SEQ_EV_SEND, to,
                        TK_SEQ_MSG_USER, content, 0);
        if (rc != TK_SEQ_OK)
            return rc;
        return enqueue(w, from, to, TK_SEQ_MSG_USER, content,
                       TK_SEQ_CARRY_TOKEN, &p->token, msgid);
    }
    return enqueue(w, from, to, TK_SEQ_MSG_USER, content, TK_SEQ_CARRY_EMPTY,
                   NULL, msgid);
}

int tk_seq_deliver_untokened(tk_seq_world *w, uint32_t to, uint64_t content,
                             uint32_t *msgid)
{
    if (live(w, to) == NULL)
        return TK_SEQ_NOPROC;
    return enqueue(w, TK_SEQ_NOBODY, to, TK_SEQ_MSG_USER, content,
                   TK_SEQ_CARRY_NONE, NULL, msgid);
}

static msg *find_queued(const tk_seq_world *w, uint32_t to, uint32_t id)
{
    if (id == 0 || id > w->nmsgs)
        return NULL;
    msg *m = &w->msgs[id - 1];
    if (!m->queued || m->to != to)
        return NULL;
    return m;
}

int tk_seq_receive(tk_seq_world *w, uint32_t id, uint32_t msgid)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    msg *m = find_queued(w, id, msgid);
    if (m == NULL)
        return TK_SEQ_NOMSG;
    m->queued = false;
    return receive_msg(w, p, id, m);
}

long tk_seq_queue(const tk_seq_world *w, uint32_t id, uint32_t *out, size_t max)
{
    if (live(w, id) == NULL)
        return TK_SEQ_NOPROC;
    /* Messages are stored in sending order, which is queue order. */
    long n = 0;
    for (size_t i = 0; i < w->nmsgs; i++) {
        const msg *m = &w->msgs[i];
        if (m->queued && m->to == id) {
            if ((size_t)n < max)
                out[n] = m->id;
            n++;
        }
    }
    return n;
}

int tk_seq_msg_info(const tk_seq_world *w, uint32_t msgid,
                    tk_seq_msg_kind *kind, uint64_t *content, uint32_t *from,
                    tk_seq_carry *carry, tk_seq_token *token)
{
    if (msgid == 0 || msgid > w->nmsgs)
        return TK_SEQ_NOMSG;
    const msg *m = &w->msgs[msgid - 1];
    if (kind != NULL)
        *kind = m->kind;
    if (content != NULL)
        *content = m->content;
    if (from != NULL)
        *from = m->from;
    if (carry != NULL)
        *carry = m->carry;
    if (token != NULL)
        *token = m->token;
    return TK_SEQ_OK;
}

static int add_link(tk_seq_world *w, uint32_t a, uint32_t b)
{
    proc *p = &w->procs[a];
    for (size_t i = 0; i < p->nlinks; i++)
        if (p->links[i] == b)
            return TK_SEQ_OK;
    if (grow((void **)&p->links, &p->caplinks, p->nlinks + 1, sizeof(uint32_t)))
        return TK_SEQ_NOMEM;
    p->links[p->nlinks++] = b;
    (void)w;
    return TK_SEQ_OK;
}

static void drop_link(proc *p, uint32_t b)
{
    for (size_t i = 0; i < p->nlinks; i++)
        if (p->links[i] == b) {
            memmove(&p->links[i], &p->links[i + 1],
                    (p->nlinks - i - 1) * sizeof(uint32_t));
            p->nlinks--;
            return;
        }
}

int tk_seq_link(tk_seq_world *w, uint32_t a, uint32_t b)
{
    if (live(w, a) == NULL || live(w, b) == NULL)
        return TK_SEQ_NOPROC;
    if (a == b)
        return TK_SEQ_OK;
    int rc = add_link(w, a, b);
    return rc != TK_SEQ_OK ? rc : add_link(w, b, a);
}

int tk_seq_spawn(tk_seq_world *w, uint32_t parent, bool link, uint32_t *child)
{
    if (live(w, parent) == NULL)
        return TK_SEQ_NOPROC;
    uint32_t c;
    int rc = tk_seq_proc_new(w, &c); /* may move w->procs */
    if (rc != TK_SEQ_OK)
        return rc;
    proc *p = &w->procs[parent];
    proc *k = &w->procs[c];
    *child = c;
    if (link && (rc = tk_seq_link(w, parent, c)) != TK_SEQ_OK)
        return rc;
    if (!p->token.present)
        return TK_SEQ_OK; /* the child starts without token, counters 0 */

    /* The spawn_request travels like a message from parent to child: the
     * parent's serial advances and the send is reported; the child
     * receives it, taking the token and its counters from it. */
    update_serial(w, p, parent);
    rc = output(w, &p->token, TK_SEQ_SEND, TK_SEQ_EV_SEND, c,
                TK_SEQ_MSG_SPAWN_REQUEST, c, 0);
    if (rc != TK_SEQ_OK)
        return rc;
    msg req = {.from = parent, .to = c, .kind = TK_SEQ_MSG_SPAWN_REQUEST,
               .content = c, .carry = TK_SEQ_CARRY_TOKEN, .token = p->token};
    if ((rc = receive_msg(w, k, c, &req)) != TK_SEQ_OK)
        return rc;

    /* The spawn_reply travels back from the child the same way ... */
    update_serial(w, k, c);
    rc = output(w, &k->token, TK_SEQ_SEND, TK_SEQ_EV_SEND, parent,
                TK_SEQ_MSG_SPAWN_REPLY, c, 0);
    if (rc != TK_SEQ_OK)
        return rc;
    const tk_seq_token reply = k->token;
    rc = output(w, &reply, TK_SEQ_RECEIVE, TK_SEQ_EV_RECEIVE, parent,
                TK_SEQ_MSG_SPAWN_REPLY, c, 0);
    if (rc != TK_SEQ_OK)
        return rc;
    /* ... but the parent does not take the reply's token: its token stays,
     * and its lastcnt and clock are both set to the reply serial's tagged
     * machine word (16 * Serial + 15), not to the serial itself. Seen on
     * OTP 27 and 29: after a spawn with serials {0,1}/{1,2} the parent's
     * next send is {47,48}. */
    uint64_t raw = tk_small_tagged(reply.serial);
    p->lastcnt = raw;
    p->clock = raw;
    return TK_SEQ_OK;
}

int tk_seq_exit(tk_seq_world *w, uint32_t id, uint64_t reason)
{
    proc *p = live(w, id);
    if (p == NULL)
        return TK_SEQ_NOPROC;
    /* Link exit signals carry the terminating process's token: each one
     * advances the serial and is reported as the send of
     * {'EXIT', id, Reason}; without a token they carry []. Every partner
     * traps exits, so each signal becomes a message in its queue. */
    for (size_t i = 0; i < p->nlinks; i++) {
        uint32_t to = p->links[i];
        int rc;
        if (p->token.present) {
            update_serial(w, p, id);
            rc = output(w, &p->token, TK_SEQ_SEND, TK_SEQ_EV_SEND, to,
                        TK_SEQ_MSG_EXIT, reason, id);
            if (rc == TK_SEQ_OK)
                rc = enqueue(w, id, to, TK_SEQ_MSG_EXIT, reason,
                             TK_SEQ_CARRY_TOKEN, &p->token, NULL);
        } else {
            rc = enqueue(w, id, to, TK_SEQ_MSG_EXIT, reason,
                         TK_SEQ_CARRY_EMPTY, NULL, NULL);
        }
        if (rc != TK_SEQ_OK)
            return rc;
        drop_link(&w->procs[to], id);
    }
    p->nlinks = 0;
    p->alive = false;
    for (size_t i = 0; i < w->nmsgs; i++)
        if (w->msgs[i].queued && w->msgs[i].to == id)
            w->msgs[i].queued = false;
    return TK_SEQ_OK;
}

void tk_seq_reset(tk_seq_world *w)
{
    /* erts_system_flag(reset_seq_trace): every process's token, clock and
     * lastcnt, and the token of every queued message, are cleared. */
    for (size_t i = 0; i < w->nprocs; i++) {
        proc *p = &w->procs[i];
        p->token.present = false;
        p->clock = 0;
        p->lastcnt = 0;
    }
    for (size_t i = 0; i < w->nmsgs; i++)
        if (w->msgs[i].queued)
            w->msgs[i].carry = TK_SEQ_CARRY_EMPTY;
}

/* ---- output ------------------------------------------------------------ */

const tk_seq_event *tk_seq_events(const tk_seq_world *w, size_t *n)
{
    *n = w->nevents;
    return w->events;
}

void tk_seq_events_clear(tk_seq_world *w)
{
    w->nevents = 0;
}
