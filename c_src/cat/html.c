/* html.c: the HTML report of tracekit_report (its default options): one
 * self-contained page, written at the end, with a summary, the sequence
 * diagram of the messages (SVG), a timeline of calls and scheduling per
 * process (SVG), and the event table in the shell's one-line format.
 *
 * The page needs every event before it is written. What is kept between
 * events is bounded the way tracekit_report bounds it: at most MAX_ROWS
 * table rows (their text), MAX_ARROWS message arrows (each with the text
 * of its message and label, not the message) and MAX_SLICES timeline
 * slices; beside these, per process its count, the calls it has not
 * returned from and whether it is scheduled in, per tag a count, and the
 * names processes registered. Nothing else grows with the events.
 *
 * Where the Erlang report takes a map's first key or folds over a map,
 * the keys are taken in Erlang's term order, the order of a map of up to
 * 32 keys: a name registered by more than 32 processes, or more than 32
 * processes with calls or scheduling open at the end while the slices
 * are at their cap, may pick other keys than the VM does. Text lengths
 * (names shortened, message labels cut) count grapheme clusters as
 * string:length/1 does for the characters a term's text can hold: a
 * character and the combining marks after it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "export.h"

#define MAX_ROWS 2000u
#define MAX_ARROWS 400u
#define MAX_SLICES 5000u
#define MERGE_WINDOW 32u

enum { ST_PENDING, ST_RECEIVED, ST_NO_PROCESS };
enum { K_PTRACE = 1, K_SEQ = 2 };
enum { DRAW_RECEIVED, DRAW_LOST, DRAW_UNKNOWN };

/* A participant of the diagram: a term (a pid or port, an alias, a name,
 * `untraced`), the text it is shown with. */
typedef struct {
    digest id;
    bool is_pid; /* pid or port: its registered name is added when shown */
    char *text;
    size_t len;
} part;

typedef struct {
    uint32_t from, to; /* parts */
    digest msg;
    uint8_t status, kinds;
    char *serial; /* "\nseq_trace label ..., serial [L,S]", or NULL */
    char *hover, *label;
} arrow;

typedef struct {
    uint32_t fid;
    i128 start;
} oframe;

typedef struct {
    digest id;
    uint64_t count;
    char *text; /* ~tw */
    unsigned char *etf; /* the term, for the term order */
    size_t etf_len;
    oframe *stack;
    size_t depth, cap;
    bool has_stack; /* a key of the report's stacks map */
    bool running;
    i128 run_start;
    bool has_last;
    i128 last;
} hproc;

typedef struct {
    digest key;
    unsigned char *etf; /* the process (any term) */
    size_t etf_len;
    char *atom; /* the name's text, UTF-8 */
    size_t atom_len;
    char *shown; /* ~tw of the name, or NULL for undefined */
} hname;

typedef struct {
    uint32_t proc;
    bool run;
    uint32_t fid;
    i128 s, e;
    uint32_t depth;
} slice;

typedef struct {
    digest msg;
    uint32_t id;
} pend;

typedef struct {
    digest key;
    uint32_t id;
} seqkey;

typedef struct {
    sink s;
    const text_opts *src;
    text_opts o;
    uint64_t n;
    eclock clock;
    unsigned char *first_ts, *last_ts;
    size_t first_len, last_len, first_cap, last_cap;
    /* tags: key = kind byte (0 atom, 1 string) and the text */
    strtab tags;
    uint64_t *tag_count;
    char **tag_shown;
    size_t tagcap;
    strtab pkeys;
    hproc *procs;
    size_t pcap;
    strtab nkeys;
    hname *names;
    size_t ncap;
    sbuf rows;
    uint64_t rows_out;
    strtab partkeys;
    part *parts;
    size_t partcap;
    uint32_t untraced; /* the part of the atom untraced */
    arrow arrows[MAX_ARROWS];
    uint32_t narrows;
    uint64_t arrows_out;
    uint32_t recent[MERGE_WINDOW];
    uint32_t nrecent;
    pend *pends;
    size_t npend, pendcap;
    seqkey *seqkeys;
    size_t nseq, seqcap;
    strtab receivers;
    strtab frames;
    slice *slices;
    size_t nslices, slicecap;
    uint64_t slices_out;
    bool failed;
    cat_failure failure;
    sbuf out, text, tmp;
    tree scratch;
} html;

static html H;

/* ---- text ------------------------------------------------------------------------- */

static void put_ns(sbuf *b, i128 ns)
{
    put_time_us(b, ns);
}

/* A character that continues the grapheme cluster before it. */
static bool extends(uint32_t c)
{
    return (c >= 0x300 && c <= 0x36F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
           (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) ||
           (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0xFE20 && c <= 0xFE2F) || c == 0x200C ||
           c == 0x200D;
}

/* The bytes of the grapheme cluster at p. */
static size_t cluster(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    uint32_t c;
    size_t k = utf8_next(u, n, &c);
    if (k == 0)
        return 1;
    if (c == '\r' && k < n && u[k] == '\n')
        return k + 1;
    while (k < n) {
        size_t m = utf8_next(u + k, n - k, &c);
        if (m == 0 || !extends(c))
            break;
        k += m;
    }
    return k;
}

static size_t clusters(const char *p, size_t n)
{
    size_t c = 0;
    for (size_t at = 0; at < n; c++)
        at += cluster(p + at, n - at);
    return c;
}

/* short/2 of the report and cut/2 of tracekit_format: at most max
 * characters, the first max - 3 and "..." when longer (max > 3). */
static void shorten(sbuf *b, const char *p, size_t n, size_t max)
{
    if (clusters(p, n) <= max) {
        if (n > 0)
            sb_put(b, p, n);
        return;
    }
    size_t at = 0;
    for (size_t c = 0; c + 3 < max && at < n; c++)
        at += cluster(p + at, n - at);
    sb_put(b, p, at);
    sb_str(b, "...");
}

/* esc/1: text made safe for element content, attribute values and XML. */
static void esc(sbuf *b, const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    for (size_t at = 0; at < n;) {
        uint32_t c;
        size_t k = utf8_next(u + at, n - at, &c);
        if (k == 0) {
            sb_str(b, "\xEF\xBF\xBD");
            at++;
            continue;
        }
        switch (c) {
        case '&':
            sb_str(b, "&amp;");
            break;
        case '<':
            sb_str(b, "&lt;");
            break;
        case '>':
            sb_str(b, "&gt;");
            break;
        case '"':
            sb_str(b, "&quot;");
            break;
        case '\'':
            sb_str(b, "&#39;");
            break;
        default:
            if ((c < 32 && c != '\t' && c != '\n') || c == 0xFFFE || c == 0xFFFF)
                sb_str(b, "\xEF\xBF\xBD");
            else
                sb_put(b, p + at, k);
        }
        at += k;
    }
}

static void esc_sb(sbuf *b, const sbuf *s)
{
    esc(b, s->p, s->len);
}

static void esc_str(sbuf *b, const char *s)
{
    esc(b, s, strlen(s));
}

static void emit(const sbuf *b)
{
    if (b->len > 0)
        out_write(b->p, b->len);
}

static void flush_out(void)
{
    if (H.out.len > 65536) {
        emit(&H.out);
        H.out.len = 0;
    }
}

/* ---- erlang:phash2/2 of a binary and of {Binary} ------------------------------------ */

#define MIX(a, b, c)                                                                         \
    do {                                                                                     \
        a -= b; a -= c; a ^= (c >> 13);                                                      \
        b -= c; b -= a; b ^= (a << 8);                                                       \
        c -= a; c -= b; c ^= (b >> 13);                                                      \
        a -= b; a -= c; a ^= (c >> 12);                                                      \
        b -= c; b -= a; b ^= (a << 16);                                                      \
        c -= a; c -= b; c ^= (b >> 5);                                                       \
        a -= b; a -= c; a ^= (c >> 3);                                                       \
        b -= c; b -= a; b ^= (a << 10);                                                      \
        c -= a; c -= b; c ^= (b >> 15);                                                      \
    } while (0)

#define HCONST 0x9e3779b9u
#define HCONST_9 0x8ff34781u
#define HCONST_13 0x08d12e65u

static uint32_t le32(const unsigned char *k)
{
    return k[0] | (uint32_t)k[1] << 8 | (uint32_t)k[2] << 16 | (uint32_t)k[3] << 24;
}

static uint32_t block_hash(const unsigned char *k, size_t length, uint32_t initval)
{
    uint32_t a = HCONST, b = HCONST, c = initval;
    size_t len = length;
    while (len >= 12) {
        a += le32(k);
        b += le32(k + 4);
        c += le32(k + 8);
        MIX(a, b, c);
        k += 12;
        len -= 12;
    }
    c += (uint32_t)length;
    switch (len) {
    case 11: c += (uint32_t)k[10] << 24; /* fall through */
    case 10: c += (uint32_t)k[9] << 16; /* fall through */
    case 9: c += (uint32_t)k[8] << 8; /* fall through */
    case 8: b += (uint32_t)k[7] << 24; /* fall through */
    case 7: b += (uint32_t)k[6] << 16; /* fall through */
    case 6: b += (uint32_t)k[5] << 8; /* fall through */
    case 5: b += k[4]; /* fall through */
    case 4: a += (uint32_t)k[3] << 24; /* fall through */
    case 3: a += (uint32_t)k[2] << 16; /* fall through */
    case 2: a += (uint32_t)k[1] << 8; /* fall through */
    case 1: a += k[0]; /* fall through */
    default: break;
    }
    MIX(a, b, c);
    return c;
}

/* make_hash2 of a binary after `hash` */
static uint32_t hash_bin(const char *p, size_t n, uint32_t hash)
{
    uint32_t con = HCONST_13 + hash;
    return n == 0 ? con : block_hash((const unsigned char *)p, n & 0xFFFFFFFFu, con);
}

static uint32_t phash2_bin(const char *p, size_t n)
{
    return hash_bin(p, n, 0);
}

static uint32_t phash2_tuple1_bin(const char *p, size_t n)
{
    uint32_t hash = 0, a = HCONST_9 + 1, b = HCONST_9;
    MIX(a, b, hash);
    return hash_bin(p, n, hash);
}

/* color/1: hsl(phash2(Name, 55),80%,62 + phash2({Name}, 14)%) */
static void color(sbuf *b, const char *p, size_t n)
{
    sb_fmt(b, "hsl(%u,80%%,%u%%)", (unsigned)(phash2_bin(p, n) % 55u),
           62u + (unsigned)(phash2_tuple1_bin(p, n) % 14u));
}

/* ---- terms ---------------------------------------------------------------------------- */

static const tnode *K(const tree *t, const tnode *n, uint32_t i)
{
    return deref(t, kid(t, n, i));
}

static bool is_ident_pp(const tnode *n)
{
    return n->type == T_PID || n->type == T_PORT;
}

static bool tuple_n(const tnode *n, uint32_t arity)
{
    return n->type == T_TUPLE && n->n == arity;
}

static unsigned char *copy_etf(const tnode *n, size_t *len)
{
    *len = n->etf ? n->etf_len : 0;
    unsigned char *p = xmalloc(*len ? *len : 1);
    if (*len)
        memcpy(p, n->etf, *len);
    return p;
}

/* Into (*buf, *cap): the term's bytes. */
static void keep_etf(unsigned char **buf, size_t *len, size_t *cap, const tnode *n)
{
    size_t l = n->etf ? n->etf_len : 0;
    GROW(*buf, *cap, l ? l : 1);
    if (l)
        memcpy(*buf, n->etf, l);
    *len = l;
}

/* A term kept as bytes, parsed into the scratch tree: its node's index,
 * or -1. */
static long parse_kept(const unsigned char *etf, size_t len)
{
    size_t at = 0;
    if (len == 0)
        return -1;
    return etf_parse(&H.scratch, etf, len, &at);
}

/* term/2 of tracekit_format with the report's depth and line length */
static void term_text(sbuf *b, const tree *t, const tnode *n)
{
    pretty_term(b, t, n, H.o.depth, H.o.line_length, true, &H.o);
}

static char *dup_sb(const sbuf *s, size_t *len)
{
    if (len)
        *len = s->len;
    return xstrndup(s->p ? s->p : "", s->len);
}

/* ---- names ---------------------------------------------------------------------------- */

static long name_index(const tree *t, const tnode *p)
{
    digest d = term_digest(t, p);
    return st_find(&H.nkeys, &d, sizeof d);
}

/* The name tracekit_format:pid/2 shows beside P (~tw), or NULL. */
static const char *name_of(const tree *t, const tnode *p)
{
    long i = name_index(t, p);
    return i < 0 ? NULL : H.names[i].shown;
}

static const char *name_of_digest(digest d)
{
    long i = st_find(&H.nkeys, &d, sizeof d);
    return i < 0 ? NULL : H.names[i].shown;
}

static void register_name(const tree *t, const tnode *p, const tnode *name)
{
    digest d = term_digest(t, p);
    bool added;
    uint32_t i = st_intern(&H.nkeys, &d, sizeof d, &added);
    if (added) {
        GROW(H.names, H.ncap, (size_t)i + 1);
        memset(&H.names[i], 0, sizeof H.names[i]);
        H.names[i].key = d;
        H.names[i].etf = copy_etf(p, &H.names[i].etf_len);
    }
    hname *h = &H.names[i];
    free(h->atom);
    free(h->shown);
    H.tmp.len = 0;
    atom_text(&H.tmp, name);
    h->atom = dup_sb(&H.tmp, &h->atom_len);
    if (is_atom(name, "undefined")) {
        h->shown = NULL;
    } else {
        H.tmp.len = 0;
        write_atom(&H.tmp, name, true);
        h->shown = dup_sb(&H.tmp, NULL);
    }
}

/* ---- processes ------------------------------------------------------------------------- */

static hproc *proc_of(const tree *t, const tnode *p, uint32_t *index)
{
    digest d = term_digest(t, p);
    bool added;
    uint32_t i = st_intern(&H.pkeys, &d, sizeof d, &added);
    if (added) {
        GROW(H.procs, H.pcap, (size_t)i + 1);
        hproc *h = &H.procs[i];
        memset(h, 0, sizeof *h);
        h->id = d;
        H.tmp.len = 0;
        write_term(&H.tmp, t, p, true, &H.o);
        h->text = dup_sb(&H.tmp, NULL);
        h->etf = copy_etf(p, &h->etf_len);
    }
    if (index)
        *index = i;
    return &H.procs[i];
}

/* pid/2 of tracekit_format: "~w (~tw)" with a name, else ~tw. */
static void pid_shown(sbuf *b, digest id, const char *text)
{
    sb_str(b, text);
    const char *name = name_of_digest(id);
    if (name != NULL) {
        sb_str(b, " (");
        sb_str(b, name);
        sb_ch(b, ')');
    }
}

/* ---- parts and arrows ------------------------------------------------------------------- */

static uint32_t part_of(const tree *t, const tnode *n)
{
    digest d = term_digest(t, n);
    bool added;
    uint32_t i = st_intern(&H.partkeys, &d, sizeof d, &added);
    if (added) {
        GROW(H.parts, H.partcap, (size_t)i + 1);
        part *p = &H.parts[i];
        p->id = d;
        p->is_pid = is_ident_pp(n);
        H.tmp.len = 0;
        if (is_atom(n, "untraced")) {
            sb_str(&H.tmp, "(untraced)");
        } else if (p->is_pid) {
            write_term(&H.tmp, t, n, true, &H.o);
        } else if (n->type == T_REF) {
            sb_str(&H.tmp, "alias ");
            term_text(&H.tmp, t, n);
        } else {
            term_text(&H.tmp, t, n);
        }
        p->text = dup_sb(&H.tmp, &p->len);
    }
    return i;
}

static void part_name(sbuf *b, const part *p)
{
    if (p->is_pid) {
        sbuf s = {0};
        sb_put(&s, p->text, p->len);
        sb_ch(&s, 0);
        pid_shown(b, p->id, s.p);
        free(s.p);
    } else {
        sb_put(b, p->text, p->len);
    }
}

/* The process a name stands for (the first key of the names map in
 * term order that has it), as a part; -1 when no process has it. */
static long named_part(const tnode *atom)
{
    H.tmp.len = 0;
    atom_text(&H.tmp, atom);
    long best = -1;
    H.scratch.len = 0;
    for (size_t i = 0; i < H.nkeys.n; i++) {
        hname *h = &H.names[i];
        if (h->atom_len != H.tmp.len || memcmp(h->atom, H.tmp.p, h->atom_len) != 0)
            continue;
        long r = parse_kept(h->etf, h->etf_len);
        if (r < 0)
            continue;
        if (best < 0 || term_cmp(&H.scratch, &H.scratch.v[r], &H.scratch.v[best]) < 0)
            best = r;
    }
    if (best < 0)
        return -1;
    return part_of(&H.scratch, &H.scratch.v[best]);
}

/* message_label/2 of tracekit_format with Max = 60 */
static void message_label(sbuf *b, const tree *t, const tnode *msg)
{
    sbuf *s = &H.text;
    s->len = 0;
    const tnode *inner = msg;
    if (tuple_n(msg, 3) && is_atom(K(t, msg, 0), "$gen_call") && tuple_n(K(t, msg, 1), 2)) {
        sb_str(s, "call ");
        inner = K(t, msg, 2);
    } else if (tuple_n(msg, 2) && is_atom(K(t, msg, 0), "$gen_cast")) {
        sb_str(s, "cast ");
        inner = K(t, msg, 1);
    } else if (tuple_n(msg, 2)) {
        const tnode *r = K(t, msg, 0);
        bool reply = r->type == T_REF;
        if (r->type == T_LIST && r->n == 1 && is_atom(K(t, r, 0), "alias") &&
            K(t, r, 1)->type == T_REF)
            reply = true;
        if (reply) {
            sb_str(s, "reply ");
            inner = K(t, msg, 1);
        }
    }
    pretty_term(s, t, inner, 8 + 60 / 10, -1, true, &H.o);
    shorten(b, s->p, s->len, 60);
}

static void in_recent_update(uint32_t id)
{
    uint32_t n = H.nrecent < MERGE_WINDOW ? H.nrecent + 1 : MERGE_WINDOW;
    memmove(H.recent + 1, H.recent, (n - 1) * sizeof *H.recent);
    H.recent[0] = id;
    H.nrecent = n;
}

/* new_arrow/5: its id (1-based), or 0 when the diagram is full. */
static uint32_t new_arrow(const tree *t, uint32_t from, const tnode *to0, const tnode *msg)
{
    if (H.narrows >= MAX_ARROWS)
        return 0;
    long to = -1;
    if (to0->type == T_ATOM)
        to = named_part(to0);
    if (to < 0)
        to = part_of(t, to0);
    uint32_t id = ++H.narrows;
    arrow *a = &H.arrows[id - 1];
    memset(a, 0, sizeof *a);
    a->from = from;
    a->to = (uint32_t)to;
    a->msg = term_digest(t, msg);
    a->status = ST_PENDING;
    H.tmp.len = 0;
    term_text(&H.tmp, t, msg);
    a->hover = dup_sb(&H.tmp, NULL);
    H.tmp.len = 0;
    message_label(&H.tmp, t, msg);
    a->label = dup_sb(&H.tmp, NULL);
    in_recent_update(id);
    return id;
}

static digest seq_digest(const tree *t, const tnode *l, const tnode *last, const tnode *ser,
                         digest from)
{
    digest d[4] = {term_digest(t, l), term_digest(t, last), term_digest(t, ser), from};
    return digest_join(d, 4);
}

static void seq_put(digest key, uint32_t id)
{
    for (size_t i = 0; i < H.nseq; i++)
        if (digest_eq(H.seqkeys[i].key, key)) {
            H.seqkeys[i].id = id;
            return;
        }
    GROW(H.seqkeys, H.seqcap, H.nseq + 1);
    H.seqkeys[H.nseq++] = (seqkey){key, id};
}

/* send/7: serial is {Last, Serial} of a seq_trace send, or NULL. */
static void msg_send(const tree *t, int kind, const tnode *from, const tnode *to, const tnode *msg,
                 const tnode *label, const tnode *serial)
{
    digest fd = term_digest(t, from), md = term_digest(t, msg);
    uint32_t id = 0;
    for (uint32_t k = 0; k < H.nrecent && id == 0; k++) {
        arrow *a = &H.arrows[H.recent[k] - 1];
        if (digest_eq(H.parts[a->from].id, fd) && digest_eq(a->msg, md) && !(a->kinds & kind))
            id = H.recent[k];
    }
    if (id == 0 && (id = new_arrow(t, part_of(t, from), to, msg)) == 0)
        return;
    arrow *a = &H.arrows[id - 1];
    a->kinds |= (uint8_t)kind;
    if (serial != NULL) {
        const tnode *last = K(t, serial, 0), *ser = K(t, serial, 1);
        free(a->serial);
        H.tmp.len = 0;
        sb_str(&H.tmp, "\nseq_trace label ");
        term_text(&H.tmp, t, label);
        sb_str(&H.tmp, ", serial [");
        write_term(&H.tmp, t, last, false, &H.o);
        sb_ch(&H.tmp, ',');
        write_term(&H.tmp, t, ser, false, &H.o);
        sb_ch(&H.tmp, ']');
        a->serial = dup_sb(&H.tmp, NULL);
        seq_put(seq_digest(t, label, last, ser, H.parts[a->from].id), id);
    } else {
        GROW(H.pends, H.pendcap, H.npend + 1);
        H.pends[H.npend++] = (pend){md, id};
    }
}

/* receive_msg/4 */
static void receive_msg(const tree *t, const tnode *to, const tnode *msg)
{
    digest md = term_digest(t, msg), td = term_digest(t, to);
    bool added;
    st_intern(&H.receivers, &td, sizeof td, &added);
    for (size_t i = 0; i < H.npend; i++) {
        if (!digest_eq(H.pends[i].msg, md))
            continue;
        arrow *a = &H.arrows[H.pends[i].id - 1];
        const part *p = &H.parts[a->to];
        if (a->status != ST_PENDING || (!digest_eq(p->id, td) && p->is_pid))
            continue;
        memmove(H.pends + i, H.pends + i + 1, (H.npend - i - 1) * sizeof *H.pends);
        H.npend--;
        a->to = part_of(t, to);
        a->status = ST_RECEIVED;
        return;
    }
    uint32_t id = new_arrow(t, H.untraced, to, msg);
    if (id == 0) {
        H.arrows_out++;
        return;
    }
    H.arrows[id - 1].status = ST_RECEIVED;
    H.arrows[id - 1].kinds = K_PTRACE;
}

static void seq_receive(const tree *t, const tnode *label, const tnode *serial,
                        const tnode *from, const tnode *to)
{
    digest key = seq_digest(t, label, K(t, serial, 0), K(t, serial, 1), term_digest(t, from));
    for (size_t i = 0; i < H.nseq; i++) {
        if (!digest_eq(H.seqkeys[i].key, key))
            continue;
        arrow *a = &H.arrows[H.seqkeys[i].id - 1];
        memmove(H.seqkeys + i, H.seqkeys + i + 1, (H.nseq - i - 1) * sizeof *H.seqkeys);
        H.nseq--;
        if (a->status == ST_PENDING) {
            a->to = part_of(t, to);
            a->status = ST_RECEIVED;
        }
        return;
    }
}

/* message/3 */
static void message(const tree *t, const tnode *ev, bool trace_like, bool seq)
{
    if (trace_like && ev->n >= 5) {
        const tnode *tag = K(t, ev, 2), *p = K(t, ev, 1);
        if (is_atom(tag, "send")) {
            msg_send(t, K_PTRACE, p, K(t, ev, 4), K(t, ev, 3), NULL, NULL);
        } else if (is_atom(tag, "send_to_non_existing_process")) {
            uint32_t id = new_arrow(t, part_of(t, p), K(t, ev, 4), K(t, ev, 3));
            if (id != 0) {
                H.arrows[id - 1].status = ST_NO_PROCESS;
                H.arrows[id - 1].kinds = K_PTRACE;
            }
        } else if (is_atom(tag, "receive")) {
            receive_msg(t, p, K(t, ev, 3));
        }
    } else if (trace_like && ev->n == 4 && is_atom(K(t, ev, 2), "receive")) {
        receive_msg(t, K(t, ev, 1), K(t, ev, 3));
    } else if (seq) {
        const tnode *label = K(t, ev, 1), *info = K(t, ev, 2);
        if (!tuple_n(info, 5) || !tuple_n(K(t, info, 1), 2))
            return;
        if (is_atom(K(t, info, 0), "send"))
            msg_send(t, K_SEQ, K(t, info, 2), K(t, info, 3), K(t, info, 4), label, K(t, info, 1));
        else if (is_atom(K(t, info, 0), "receive"))
            seq_receive(t, label, K(t, info, 1), K(t, info, 2), K(t, info, 3));
    }
}

/* ---- timeline ---------------------------------------------------------------------------- */

static void add_slice(uint32_t proc, bool run, uint32_t fid, i128 s, i128 e, uint32_t depth)
{
    if (H.nslices >= MAX_SLICES) {
        H.slices_out++;
        return;
    }
    GROW(H.slices, H.slicecap, H.nslices + 1);
    H.slices[H.nslices++] = (slice){proc, run, fid, s, e, depth};
}

/* close_frames/5: the frames from index `keep` up, top first, each at
 * the depth of its place in the stack. */
static void close_frames(uint32_t pi, size_t keep, i128 time)
{
    hproc *p = &H.procs[pi];
    while (p->depth > keep) {
        p->depth--;
        add_slice(pi, false, p->stack[p->depth].fid, p->stack[p->depth].start, time,
                  (uint32_t)p->depth);
        p = &H.procs[pi];
    }
}

/* "M:F/A" of the report's timeline: atoms as tracekit_export:term_text/2 */
static uint32_t frame_id(const tree *t, const tnode *m, const tnode *f, const tnode *a, bool args)
{
    sbuf *b = &H.tmp;
    b->len = 0;
    tt_atom(b, m);
    sb_ch(b, ':');
    tt_atom(b, f);
    sb_ch(b, '/');
    if (args && a->type == T_NIL) {
        sb_ch(b, '0');
    } else if (args && a->type == T_LIST) {
        list_it it;
        const tnode *tail;
        uint64_t n = 0;
        list_begin(&it, t, a);
        while (list_next(&it, &tail) != NULL)
            n++;
        if (deref(t, tail)->type == T_NIL)
            sb_fmt(b, "%llu", (unsigned long long)n);
        else
            sb_ch(b, '?');
    } else if (a->type == T_INT || a->type == T_BIG) {
        tt_int(b, a);
    } else {
        sb_ch(b, '?');
    }
    return st_intern(&H.frames, b->p, b->len, NULL);
}

static void timeline(const tree *t, const tnode *ev, uint32_t pi, i128 time, bool trace_like)
{
    hproc *p = &H.procs[pi];
    p->has_last = true;
    p->last = time;
    if (!trace_like || ev->n < 4)
        return;
    const tnode *tag = K(t, ev, 2), *x = K(t, ev, 3);
    bool mfa = tuple_n(x, 3) && K(t, x, 0)->type == T_ATOM && K(t, x, 1)->type == T_ATOM;
    if (is_atom(tag, "call") && mfa) {
        uint32_t fid = frame_id(t, K(t, x, 0), K(t, x, 1), K(t, x, 2), true);
        p = &H.procs[pi];
        GROW(p->stack, p->cap, p->depth + 1);
        p->stack[p->depth++] = (oframe){fid, time};
        p->has_stack = true;
    } else if ((is_atom(tag, "return_from") || is_atom(tag, "exception_from") ||
                is_atom(tag, "return_to")) && mfa) {
        uint32_t fid = frame_id(t, K(t, x, 0), K(t, x, 1), K(t, x, 2), false);
        p = &H.procs[pi];
        size_t i = p->depth;
        while (i > 0 && p->stack[i - 1].fid != fid)
            i--;
        if (i == 0)
            return;
        close_frames(pi, is_atom(tag, "return_to") ? i : i - 1, time);
        H.procs[pi].has_stack = true;
    } else if (is_atom(tag, "exit")) {
        close_frames(pi, 0, time);
        H.procs[pi].has_stack = true;
    } else if (is_atom(tag, "in") || is_atom(tag, "in_exiting")) {
        if (!p->running) {
            p->running = true;
            p->run_start = time;
        }
    } else if (is_atom(tag, "out") || is_atom(tag, "out_exiting") || is_atom(tag, "out_exited")) {
        if (p->running) {
            p->running = false;
            add_slice(pi, true, 0, p->run_start, time, 0);
        }
    }
}

typedef struct {
    long root; /* in the scratch tree; -1: none (first) */
    uint32_t ix;
} keyed;

static int by_root(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->root < 0 || y->root < 0)
        return (x->root >= 0) - (y->root >= 0);
    return term_cmp(&H.scratch, &H.scratch.v[x->root], &H.scratch.v[y->root]);
}

/* Processes in the term order of their pids (a small map's order). */
static uint32_t *procs_in_order(bool (*want)(const hproc *), size_t *n)
{
    keyed *k = xmalloc((H.pkeys.n + 1) * sizeof *k);
    size_t m = 0;
    H.scratch.len = 0;
    for (uint32_t i = 0; i < H.pkeys.n; i++)
        if (want(&H.procs[i]))
            k[m++] = (keyed){parse_kept(H.procs[i].etf, H.procs[i].etf_len), i};
    qsort(k, m, sizeof *k, by_root);
    uint32_t *ix = xmalloc((m + 1) * sizeof *ix);
    for (size_t i = 0; i < m; i++)
        ix[i] = k[i].ix;
    free(k);
    *n = m;
    return ix;
}

static bool has_stack(const hproc *p)
{
    return p->has_stack;
}

static bool is_running(const hproc *p)
{
    return p->running;
}

/* close_open/1 */
static void close_open(void)
{
    size_t n;
    uint32_t *ix = procs_in_order(has_stack, &n);
    for (size_t k = 0; k < n; k++) {
        hproc *p = &H.procs[ix[k]];
        close_frames(ix[k], 0, p->has_last ? p->last : 0);
    }
    free(ix);
    ix = procs_in_order(is_running, &n);
    for (size_t k = 0; k < n; k++) {
        hproc *p = &H.procs[ix[k]];
        add_slice(ix[k], true, 0, p->run_start, p->has_last ? p->last : p->run_start, 0);
        p->running = false;
    }
    free(ix);
}

/* ---- one event ------------------------------------------------------------------------------- */

static void count_tag(uint8_t kind, const char *p, size_t n, const tnode *atom)
{
    sbuf *b = &H.tmp;
    b->len = 0;
    sb_ch(b, (char)kind);
    if (n > 0)
        sb_put(b, p, n);
    bool added;
    uint32_t i = st_intern(&H.tags, b->p, b->len, &added);
    if (added) {
        GROW(H.tag_count, H.tagcap, (size_t)i + 1);
        H.tag_shown = xrealloc(H.tag_shown, H.tagcap * sizeof *H.tag_shown);
        H.tag_count[i] = 0;
        b->len = 0;
        if (atom != NULL)
            write_atom(b, atom, true);
        else if (n > 0)
            sb_put(b, p, n);
        H.tag_shown[i] = dup_sb(b, NULL);
    }
    H.tag_count[i]++;
}

static void refresh_opts(void)
{
    H.o = *H.src;
    H.o.names = name_of;
}

static void event_cb(sink *s, const unsigned char *etf, size_t len, const tree *t,
                     const tnode *ev, int64_t rtime, const char *node)
{
    (void)s, (void)etf, (void)len, (void)rtime, (void)node;
    refresh_opts();
    event e;
    event_parse(t, ev, &e);
    H.n++;
    bool was_timed = H.clock.timed;
    i128 time = clock_tick(&H.clock, &e);
    if (e.ts != NULL) {
        if (!was_timed)
            keep_etf(&H.first_ts, &H.first_len, &H.first_cap, e.ts);
        keep_etf(&H.last_ts, &H.last_len, &H.last_cap, e.ts);
    }
    const tnode *first = ev->type == T_TUPLE && ev->n > 0 ? K(t, ev, 0) : NULL;
    bool trace_like = first != NULL && (is_atom(first, "trace") || is_atom(first, "trace_ts")) &&
                      ev->n >= 4;
    bool seq = first != NULL && is_atom(first, "seq_trace") && (ev->n == 3 || ev->n == 4);
    /* process/1 */
    const tnode *proc = NULL;
    if (trace_like) {
        proc = K(t, ev, 1);
    } else if (seq) {
        const tnode *info = K(t, ev, 2);
        if (tuple_n(info, 5))
            proc = is_atom(K(t, info, 0), "receive") ? K(t, info, 3) : K(t, info, 2);
    }
    if (proc != NULL && !is_ident_pp(proc))
        proc = NULL;
    /* tag/1 */
    if (trace_like && K(t, ev, 2)->type == T_ATOM) {
        const tnode *a = K(t, ev, 2);
        H.text.len = 0;
        atom_text(&H.text, a);
        count_tag(0, H.text.p, H.text.len, a);
    } else if (seq) {
        const tnode *info = K(t, ev, 2);
        H.text.len = 0;
        sb_str(&H.text, "seq_trace");
        if (info->type == T_TUPLE && info->n > 0 && K(t, info, 0)->type == T_ATOM) {
            sb_ch(&H.text, ' ');
            atom_text(&H.text, K(t, info, 0));
        }
        count_tag(1, H.text.p, H.text.len, NULL);
    } else {
        count_tag(0, "other", 5, NULL);
        /* shown as ~tw of the atom other */
    }
    uint32_t pi = 0;
    if (proc != NULL)
        proc_of(t, proc, &pi)->count++;
    /* register_name/2 */
    if (trace_like && is_atom(K(t, ev, 2), "register") && K(t, ev, 3)->type == T_ATOM)
        register_name(t, K(t, ev, 1), K(t, ev, 3));
    /* row/3 */
    if (H.n <= MAX_ROWS) {
        sbuf *r = &H.rows;
        sb_fmt(r, "<tr><td class=\"n\">%llu</td><td class=\"t\">", (unsigned long long)H.n);
        put_ns(r, time);
        sb_str(r, "</td><td class=\"e\">");
        H.text.len = 0;
        text_line(&H.text, t, ev, &H.o);
        esc_sb(r, &H.text);
        sb_str(r, "</td></tr>\n");
    } else {
        H.rows_out++;
    }
    message(t, ev, trace_like, seq);
    if (proc != NULL)
        timeline(t, ev, pi, time, trace_like);
}

static void lost_cb(sink *s, uint64_t n)
{
    (void)s, (void)n; /* the report is not told of events lost in the files */
}

void html_failed(const cat_failure *f)
{
    H.failed = true;
    H.failure = *f;
}

/* ---- the page ------------------------------------------------------------------------------------ */

static void left_out(sbuf *b, uint64_t n, const char *one, const char *many, const char *what,
                     unsigned max)
{
    if (n == 0)
        return;
    sb_fmt(b, "<p class=\"cap\">%llu more %s left out (%s%u).</p>\n", (unsigned long long)n,
           n == 1 ? one : many, what, max);
}

static const char CSS[] =
    "body{font-family:sans-serif;margin:1em 2em;color:#222}"
    ".boxes{display:flex;gap:2.5em;align-items:flex-start;flex-wrap:wrap}.boxes h3{margin:0 0 .4em 0;font-size:1em}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:0.85em}"
    "td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}"
    "table.events td.e{font-family:monospace;white-space:pre-wrap;word-break:break-all}"
    "td.n,td.t{font-family:monospace;text-align:right;white-space:nowrap}"
    ".summary td{font-family:monospace}.cap,.warn{color:#a40}.note{color:#555}"
    "svg text{font-family:monospace;font-size:11px}"
    ".lifeline{stroke:#999;stroke-dasharray:4 3}"
    ".msg{stroke:#1565c0;stroke-width:1.4;fill:none}.msg.lost{stroke:#c62828}"
    ".msg.unknown{stroke-dasharray:5 3}.cross{stroke:#c62828;stroke-width:2}"
    ".head rect{fill:#eef3fb;stroke:#1565c0}.row:hover .msg{stroke-width:3}"
    ".call{stroke:#fff;stroke-width:0.5}.run{fill:#3f6fb5}.axis{stroke:#bbb}";

/* tracekit_format:time/1 of a kept timestamp */
static void ts_text(sbuf *b, const unsigned char *etf, size_t len)
{
    H.scratch.len = 0;
    long r = parse_kept(etf, len);
    if (r >= 0)
        text_time(b, &H.scratch, &H.scratch.v[r], &H.o);
}

static int tag_cmp(const void *a, const void *b)
{
    size_t la, lb;
    const char *pa = st_key(&H.tags, *(const uint32_t *)a, &la);
    const char *pb = st_key(&H.tags, *(const uint32_t *)b, &lb);
    if (pa[0] != pb[0])
        return pa[0] < pb[0] ? -1 : 1;
    int c = memcmp(pa + 1, pb + 1, (la < lb ? la : lb) - 1);
    if (c != 0)
        return c;
    return la < lb ? -1 : la > lb ? 1 : 0;
}

static void summary(sbuf *b)
{
    sb_str(b, "<h2 id=\"summary\">Summary</h2>\n<div class=\"boxes\">\n<div>\n<table class=\"summary\">\n");
    sb_fmt(b, "<tr><th>events</th><td>%llu</td></tr>\n", (unsigned long long)H.n);
    sb_str(b, "<tr><th>time</th><td>");
    H.text.len = 0;
    if (!H.clock.timed) {
        sb_str(&H.text, "no timestamps");
    } else {
        ts_text(&H.text, H.first_ts, H.first_len);
        sb_str(&H.text, " to ");
        ts_text(&H.text, H.last_ts, H.last_len);
    }
    esc_sb(b, &H.text);
    sb_str(b, "</td></tr>\n");
    sb_fmt(b, "<tr><th>processes</th><td>%u</td></tr>\n", H.pkeys.n);
    sb_fmt(b, "<tr><th>messages drawn</th><td>%u</td></tr>\n", H.narrows);
    sb_str(b, "</table>\n</div>\n");
    sb_str(b, "<div>\n<h3>Processes</h3>\n<table class=\"procs\"><thead><tr><th>process</th><th>events</th></tr>"
              "</thead>\n<tbody>\n");
    for (uint32_t i = 0; i < H.pkeys.n; i++) {
        H.text.len = 0;
        pid_shown(&H.text, H.procs[i].id, H.procs[i].text);
        sb_str(b, "<tr><td>");
        esc_sb(b, &H.text);
        sb_fmt(b, "</td><td>%llu</td></tr>\n", (unsigned long long)H.procs[i].count);
        flush_out();
    }
    sb_str(b, "</tbody></table>\n</div>\n");
    sb_str(b, "<div>\n<h3>Events by tag</h3>\n<table class=\"tags\"><thead><tr><th>tag</th><th>events</th></tr>"
              "</thead>\n<tbody>\n");
    uint32_t *ix = xmalloc((H.tags.n + 1) * sizeof *ix);
    for (uint32_t i = 0; i < H.tags.n; i++)
        ix[i] = i;
    qsort(ix, H.tags.n, sizeof *ix, tag_cmp);
    for (uint32_t k = 0; k < H.tags.n; k++) {
        sb_str(b, "<tr><td>");
        esc_str(b, H.tag_shown[ix[k]]);
        sb_fmt(b, "</td><td>%llu</td></tr>\n", (unsigned long long)H.tag_count[ix[k]]);
    }
    free(ix);
    sb_str(b, "</tbody></table>\n</div>\n</div>\n");
}

static void num(sbuf *b, i128 v)
{
    put_i128(b, v);
}

static void diagram(sbuf *b)
{
    if (H.narrows == 0) {
        sb_str(b, "<p>No messages were traced.</p>\n");
        return;
    }
    uint8_t draw[MAX_ARROWS];
    long *order = xmalloc((H.partkeys.n + 1) * sizeof *order);
    uint32_t *parts = xmalloc((H.partkeys.n + 1) * sizeof *parts);
    uint32_t nparts = 0;
    for (uint32_t i = 0; i < H.partkeys.n; i++)
        order[i] = -1;
    for (uint32_t i = 0; i < H.narrows; i++) {
        arrow *a = &H.arrows[i];
        digest to = H.parts[a->to].id;
        draw[i] = a->status == ST_RECEIVED     ? DRAW_RECEIVED
                  : a->status == ST_NO_PROCESS ? DRAW_LOST
                  : st_find(&H.receivers, &to, sizeof to) >= 0 ? DRAW_LOST
                                                                : DRAW_UNKNOWN;
        uint32_t ends[2] = {a->from, a->to};
        for (int k = 0; k < 2; k++)
            if (order[ends[k]] < 0) {
                order[ends[k]] = nparts;
                parts[nparts++] = ends[k];
            }
    }
    const i128 col = 190, left = 110, top = 50, rowh = 30;
#define X(p) (left + col * order[p])
    i128 w = left + col * (nparts - 1) + 120, h = top + rowh * H.narrows + 30;
    sb_str(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"sequence\" width=\"");
    num(b, w);
    sb_str(b, "\" height=\"");
    num(b, h);
    sb_str(b, "\" viewBox=\"0 0 ");
    num(b, w);
    sb_ch(b, ' ');
    num(b, h);
    sb_str(b, "\">\n<defs><marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" "
              "markerHeight=\"8\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#1565c0\"/></marker>"
              "</defs>\n");
    for (uint32_t k = 0; k < nparts; k++) {
        uint32_t p = parts[k];
        H.text.len = 0;
        part_name(&H.text, &H.parts[p]);
        sb_str(b, "<g class=\"head\"><rect x=\"");
        num(b, X(p) - 90);
        sb_str(b, "\" y=\"4\" width=\"180\" height=\"26\" rx=\"3\"/><text x=\"");
        num(b, X(p));
        sb_str(b, "\" y=\"21\" text-anchor=\"middle\">");
        H.tmp.len = 0;
        shorten(&H.tmp, H.text.p, H.text.len, 28);
        esc_sb(b, &H.tmp);
        sb_str(b, "<title>");
        esc_sb(b, &H.text);
        sb_str(b, "</title></text></g>\n<line class=\"lifeline\" x1=\"");
        num(b, X(p));
        sb_str(b, "\" y1=\"30\" x2=\"");
        num(b, X(p));
        sb_str(b, "\" y2=\"");
        num(b, h - 10);
        sb_str(b, "\"/>\n");
        flush_out();
    }
    for (uint32_t i = 0; i < H.narrows; i++) {
        arrow *a = &H.arrows[i];
        i128 x1 = X(a->from), x2 = X(a->to), y = top + rowh * (i + 1);
        int st = draw[i];
        H.text.len = 0;
        sb_str(&H.text, a->hover);
        if (a->serial)
            sb_str(&H.text, a->serial);
        if (st == DRAW_LOST)
            sb_str(&H.text, "\nnever received");
        else if (st == DRAW_UNKNOWN)
            sb_str(&H.text, "\nreceive not traced");
        const char *cls = st == DRAW_RECEIVED ? "msg" : st == DRAW_LOST ? "msg lost" : "msg unknown";
        const char *marker = st == DRAW_LOST ? "" : " marker-end=\"url(#head)\"";
        sb_fmt(b, "<g class=\"row\" id=\"m%u\"><title>", i + 1);
        esc_sb(b, &H.text);
        sb_str(b, "</title>");
        if (x1 == x2) {
            sb_fmt(b, "<path class=\"%s\" d=\"M", cls);
            num(b, x1);
            sb_ch(b, ',');
            num(b, y - 6);
            sb_fmt(b, "h30v12h-28\"%s/>", marker);
        } else {
            i128 dir = x2 > x1 ? 1 : -1;
            sb_fmt(b, "<line class=\"%s\" x1=\"", cls);
            num(b, x1);
            sb_str(b, "\" y1=\"");
            num(b, y);
            sb_str(b, "\" x2=\"");
            num(b, x2 - dir * 2);
            sb_str(b, "\" y2=\"");
            num(b, y);
            sb_fmt(b, "\"%s/>", marker);
        }
        if (st == DRAW_LOST) {
            i128 cx = x1 == x2 ? x1 + 2 : x2;
            sb_str(b, "<line class=\"cross\" x1=\"");
            num(b, cx - 6);
            sb_str(b, "\" y1=\"");
            num(b, y - 6);
            sb_str(b, "\" x2=\"");
            num(b, cx + 6);
            sb_str(b, "\" y2=\"");
            num(b, y + 6);
            sb_str(b, "\"/><line class=\"cross\" x1=\"");
            num(b, cx - 6);
            sb_str(b, "\" y1=\"");
            num(b, y + 6);
            sb_str(b, "\" x2=\"");
            num(b, cx + 6);
            sb_str(b, "\" y2=\"");
            num(b, y - 6);
            sb_str(b, "\"/>");
        }
        i128 tx = x1 == x2 ? x1 + 36 : (x1 + x2) / 2;
        sb_str(b, "<text x=\"");
        num(b, tx);
        sb_str(b, "\" y=\"");
        num(b, y - 4);
        sb_fmt(b, "\" text-anchor=\"%s\">", x1 == x2 ? "start" : "middle");
        esc_str(b, a->label);
        sb_str(b, "</text></g>\n");
        flush_out();
    }
#undef X
    sb_str(b, "</svg>\n");
    left_out(b, H.arrows_out, "message", "messages", "the diagram shows the first ", MAX_ARROWS);
    free(order);
    free(parts);
}

static i128 imax(i128 a, i128 b)
{
    return a > b ? a : b;
}

static void slice_svg(sbuf *b, const slice *s, i128 y, i128 runy, i128 t0, i128 span)
{
    const i128 left = 200, width = 900, barh = 14;
    i128 x = left + (s->s - t0) * width / span;
    i128 w = imax(1, (s->e - s->s) * width / span);
    i128 sy = s->run ? runy + 2 : y + (i128)s->depth * barh;
    size_t nl;
    const char *name = s->run ? "running" : st_key(&H.frames, s->fid, &nl);
    if (s->run)
        nl = 7;
    sb_fmt(b, "<rect class=\"%s\" x=\"", s->run ? "run" : "call");
    num(b, x);
    sb_str(b, "\" y=\"");
    num(b, sy);
    sb_str(b, "\" width=\"");
    num(b, w);
    sb_str(b, "\" height=\"");
    num(b, s->run ? 6 : barh - 1);
    sb_ch(b, '"');
    if (!s->run) {
        sb_str(b, " fill=\"");
        color(b, name, nl);
        sb_ch(b, '"');
    }
    sb_str(b, "><title>");
    H.text.len = 0;
    sb_put(&H.text, name, nl);
    sb_ch(&H.text, ' ');
    put_ns(&H.text, s->e - s->s);
    sb_str(&H.text, " \xC2\xB5s");
    esc_sb(b, &H.text);
    sb_str(b, "</title></rect>");
    if (!s->run && w > 60) {
        sb_str(b, "<text x=\"");
        num(b, x + 2);
        sb_str(b, "\" y=\"");
        num(b, sy + 10);
        sb_str(b, "\">");
        H.text.len = 0;
        i128 m = imax(1, w / 7);
        shorten(&H.text, name, nl, (size_t)m);
        esc_sb(b, &H.text);
        sb_str(b, "</text>");
    }
    sb_ch(b, '\n');
}

static void timeline_svg(sbuf *b)
{
    if (H.nslices == 0) {
        sb_str(b, "<p>No calls or scheduling were traced.</p>\n");
        return;
    }
    i128 t0 = H.slices[0].s, t1 = H.slices[0].e;
    bool *in = xmalloc(H.pkeys.n + 1);
    memset(in, 0, H.pkeys.n + 1);
    for (size_t i = 0; i < H.nslices; i++) {
        if (H.slices[i].s < t0)
            t0 = H.slices[i].s;
        if (H.slices[i].e > t1)
            t1 = H.slices[i].e;
        in[H.slices[i].proc] = true;
    }
    i128 span = imax(t1 - t0, 1);
    const i128 left = 200, width = 900, barh = 14;
    sb_str(b, "<p class=\"note\">Time in microseconds from the first event. Bars: traced calls (nested), "
              "and in blue beneath them the time the process was scheduled in (when scheduling was traced).</p>\n");
    /* the height is known once the bands are: they go to a buffer of their own */
    sbuf bands = {0};
    i128 y = 24;
    for (uint32_t p = 0; p < H.pkeys.n; p++) {
        if (!in[p])
            continue;
        i128 depth = 0;
        for (size_t i = 0; i < H.nslices; i++)
            if (H.slices[i].proc == p && !H.slices[i].run)
                depth = imax(depth, (i128)H.slices[i].depth + 1);
        i128 runy = y + depth * barh;
        sb_str(&bands, "<g class=\"proc\"><text x=\"4\" y=\"");
        num(&bands, y + 11);
        sb_str(&bands, "\">");
        H.tmp.len = 0;
        pid_shown(&H.tmp, H.procs[p].id, H.procs[p].text);
        sbuf sh = {0};
        shorten(&sh, H.tmp.p, H.tmp.len, 26);
        esc_sb(&bands, &sh);
        free(sh.p);
        sb_str(&bands, "</text>\n");
        for (size_t i = H.nslices; i > 0; i--)
            if (H.slices[i - 1].proc == p)
                slice_svg(&bands, &H.slices[i - 1], y, runy, t0, span);
        sb_str(&bands, "<line class=\"axis\" x1=\"");
        num(&bands, left);
        sb_str(&bands, "\" y1=\"");
        num(&bands, runy + 8);
        sb_str(&bands, "\" x2=\"");
        num(&bands, left + width);
        sb_str(&bands, "\" y2=\"");
        num(&bands, runy + 8);
        sb_str(&bands, "\"/></g>\n");
        y = runy + 16;
    }
    free(in);
    sb_str(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"");
    num(b, left + width + 40);
    sb_str(b, "\" height=\"");
    num(b, y + 10);
    sb_str(b, "\">\n");
    for (int i = 0; i <= 4; i++) {
        sb_str(b, "<text x=\"");
        num(b, left + width * i / 4);
        sb_str(b, "\" y=\"14\" text-anchor=\"middle\">");
        put_ns(b, t0 + span * i / 4);
        sb_str(b, "</text>");
    }
    sb_ch(b, '\n');
    emit(b);
    b->len = 0;
    emit(&bands);
    free(bands.p);
    sb_str(b, "</svg>\n");
    left_out(b, H.slices_out, "slice", "slices", "the timeline shows the first ", MAX_SLICES);
}

static const char *posix_name(int e)
{
    static const struct {
        int e;
        const char *name;
    } names[] = {{ENOENT, "enoent"}, {EACCES, "eacces"}, {EISDIR, "eisdir"},
                 {ENOTDIR, "enotdir"}, {ELOOP, "eloop"}, {ENAMETOOLONG, "enametoolong"},
                 {EMFILE, "emfile"}, {ENFILE, "enfile"}, {EIO, "eio"},
                 {EPERM, "eperm"}, {ENXIO, "enxio"}, {EINVAL, "einval"},
                 {ENOMEM, "enomem"}, {ENODEV, "enodev"}, {EOVERFLOW, "eoverflow"},
                 {EFBIG, "efbig"}, {EAGAIN, "eagain"}, {EBUSY, "ebusy"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (names[k].e == e)
            return names[k].name;
    return "unknown";
}

/* The file name as a string: a list of its characters. */
static void encode_path(ei_x_buff *x, const char *path)
{
    size_t n = strlen(path), chars = 0;
    const unsigned char *u = (const unsigned char *)path;
    for (size_t at = 0; at < n; chars++) {
        uint32_t c;
        size_t k = utf8_next(u + at, n - at, &c);
        at += k ? k : 1;
    }
    if (chars == 0) {
        ei_x_encode_empty_list(x);
        return;
    }
    ei_x_encode_list_header(x, (long)chars);
    for (size_t at = 0; at < n;) {
        uint32_t c;
        size_t k = utf8_next(u + at, n - at, &c);
        if (k == 0)
            c = u[at], k = 1;
        ei_x_encode_ulong(x, c);
        at += k;
    }
    ei_x_encode_empty_list(x);
}

/* The read error as tracekit_file:fold/3 gives it, ~0tP with depth 10. */
static void read_error(sbuf *b)
{
    const cat_failure *f = &H.failure;
    ei_x_buff x;
    ei_x_new(&x);
    if (f->status == CAT_DAMAGED) {
        ei_x_encode_tuple_header(&x, 3);
        ei_x_encode_atom(&x, "corrupt");
        encode_path(&x, f->file);
        ei_x_encode_ulonglong(&x, (unsigned long long)f->offset);
    } else if (f->status == CAT_NOFILE && f->err < 0) {
        ei_x_encode_tuple_header(&x, 2);
        ei_x_encode_atom(&x, "no_files");
        encode_path(&x, f->file);
    } else {
        ei_x_encode_tuple_header(&x, 3);
        ei_x_encode_atom(&x, "file");
        encode_path(&x, f->file);
        ei_x_encode_atom(&x, f->status == CAT_NOTTRACE ? "not_a_trace" : posix_name(f->err));
    }
    H.scratch.len = 0;
    size_t at = 0;
    long r = etf_parse(&H.scratch, (const unsigned char *)x.buff, (size_t)x.index, &at);
    H.text.len = 0;
    if (r >= 0)
        pretty_term(&H.text, &H.scratch, &H.scratch.v[r], 10, -1, true, &H.o);
    ei_x_free(&x);
    sb_str(b, "<p class=\"warn\">The trace could not be read to its end: ");
    esc_sb(b, &H.text);
    sb_str(b, ". What was read before is shown.</p>\n");
}

static void finish_cb(sink *s)
{
    (void)s;
    refresh_opts();
    close_open();
    sbuf *b = &H.out;
    sb_str(b, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
              "<meta charset=\"utf-8\"/>\n<title>tracekit report</title>\n<style>");
    sb_str(b, CSS);
    sb_str(b, "</style>\n</head>\n<body>\n<h1>tracekit report</h1>\n");
    if (H.failed)
        read_error(b);
    summary(b);
    sb_str(b, "<h2 id=\"messages\">Messages</h2>\n");
    diagram(b);
    sb_str(b, "<h2 id=\"timeline\">Timeline</h2>\n");
    timeline_svg(b);
    sb_str(b, "<h2 id=\"events\">Events</h2>\n"
              "<table class=\"events\" id=\"event-table\">\n<thead><tr><th>#</th><th>time (&#181;s)</th>"
              "<th>event</th></tr></thead>\n<tbody>\n");
    emit(b);
    b->len = 0;
    emit(&H.rows);
    sb_str(b, "</tbody>\n</table>\n");
    left_out(b, H.rows_out, "event", "events", "the table shows the first ", MAX_ROWS);
    sb_str(b, "</body>\n</html>\n");
    emit(b);
    b->len = 0;
}

sink *html_sink(const text_opts *o)
{
    static const unsigned char untraced[] = {119, 8, 'u', 'n', 't', 'r', 'a', 'c', 'e', 'd'};
    H.s = (sink){event_cb, lost_cb, finish_cb, true};
    H.src = o;
    refresh_opts();
    tree ut = {0};
    size_t at = 0;
    long r = etf_parse(&ut, untraced, sizeof untraced, &at);
    H.untraced = part_of(&ut, &ut.v[r]);
    free(ut.v);
    return &H.s;
}
