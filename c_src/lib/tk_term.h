/* tk_term.h: the byte format of trace events inside ring records, and a
 * reader for it that needs no VM.
 *
 * An event record (the payload of a ring record) is:
 *
 *   u8   flags: TK_EV_EXTRA | TK_EV_MSR | TK_EV_SCHED, timestamp kind << 4
 *   u8   tag: the index of the event's tag in tk_tags (tk_tags.h)
 *   then one encoded term per field present, in this order:
 *        tracee           (seq_trace: the label)
 *        timestamp        if the kind is not TK_TS_NONE: the term the
 *                         process tracer would show ({Mega, Sec, Micro},
 *                         an integer, or {Mono, Unique})
 *        scheduler id     if TK_EV_SCHED: an integer term
 *        match-spec result if TK_EV_MSR
 *        extra            if TK_EV_EXTRA
 *        trace term       (seq_trace: the info tuple)
 *
 * tk_event_field_present() is the one statement of that order: the
 * encoder writes and tk_event_parse() reads the fields by walking it.
 *
 * A term is one tag byte, then (n, k: unsigned varints; v: a signed one):
 *   TK_T_NIL                     []
 *   TK_T_IMM     v               an immediate (atom, small integer, local
 *                                pid or port): the VM's own term word,
 *                                whose two low bits are always 11, shifted
 *                                right by 2 (arithmetically): valid in every
 *                                environment of that VM
 *   TK_T_INT     v               an integer of 64 bits
 *   TK_T_FLOAT   double
 *   TK_T_BIN     n, n bytes
 *   TK_T_BINCUT  n, total, n bytes: a binary cut to its first n bytes
 *                                (decodes to {'...', Prefix, Total})
 *   TK_T_LIST    n, n terms, the tail term
 *   TK_T_TUPLE   n, n terms
 *   TK_T_MAP     n, n key terms and value terms, alternating
 *   TK_T_EXT     n, n bytes of external term format (references,
 *                                funs, bignums, remote pids and ports)
 *   TK_T_FUN     n, n bytes: a fun kept by name only, its
 *                                environment left out (decodes to
 *                                {'...', fun, Name})
 *   TK_T_CUT                     the marker '...': what did not fit
 *   TK_T_DICT    k               entry k of the trace file's dictionary
 *                                (only in files, see FORMAT.md: a file
 *                                holds no VM words)
 *   TK_T_ATOM    k               an atom: its VM word (ERTS's layout,
 *                                index << 6 | 0x0B) shifted right by 6
 *   TK_T_PID     k               a local pid: its VM word (index << 4 |
 *                                0x3) shifted right by 4
 *   TK_T_NOW     k, k, k         {Mega, Sec, Micro}: three integers of 0
 *                                to 2^63 - 1 (the timestamps of kinds
 *                                `timestamp' and `cpu_timestamp')
 * ATOM and PID are written only where the VM's words were found at load to
 * have those layouts (tk_codec's check), TK_T_IMM otherwise; like IMM they
 * are VM words, never in a file. A file holds NOW as the tuple it stands
 * for.
 * A varint is LEB128: 7 bits a byte, low bits first, the high bit set on
 * every byte but the last; at most 10 bytes (64 bits), and a length or a
 * count at most 2^32 - 1. A signed one is zigzag-mapped first (0, -1, 1,
 * -2 ... as 0, 1, 2, 3 ...), so that small magnitudes of either sign take
 * one byte. A double is 8 bytes in native byte order, unaligned. (Trace
 * files are little-endian: tracekit writes them only on little-endian
 * machines.) Tags 2 and 13 were 4-byte immediates and integers in version
 * 1 of the trace file format (tk_event_from_v1 reads them).
 *
 * Nesting. A list, tuple or map may only be opened at a depth where
 * tk_term_may_nest() holds (the terms of an event record are at depth 0,
 * the elements of a container one deeper). The encoder writes the marker
 * in place of a deeper container; the reader refuses one. So every
 * decoder's recursion is bounded, and everything the encoder writes
 * decodes.
 */
#ifndef TK_TERM_H
#define TK_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    TK_T_NIL = 0,
    TK_T_IMM,
    TK_T_INT = 3,
    TK_T_FLOAT,
    TK_T_BIN,
    TK_T_BINCUT,
    TK_T_LIST,
    TK_T_TUPLE,
    TK_T_MAP,
    TK_T_EXT,
    TK_T_FUN,
    TK_T_CUT,
    TK_T_DICT = 14,
    TK_T_ATOM,
    TK_T_PID,
    TK_T_NOW,
    TK_T_LAST = TK_T_NOW
};

/* Deepest nesting of containers in an event's term. */
#define TK_TERM_MAX_DEPTH 200

/* Whether a container may be opened at `depth`. */
static inline bool tk_term_may_nest(unsigned depth)
{
    return depth < TK_TERM_MAX_DEPTH;
}

/* ---- event records ----------------------------------------------------- */

#define TK_EV_EXTRA 1u
#define TK_EV_MSR 2u
#define TK_EV_SCHED 4u
enum { TK_TS_NONE = 0, TK_TS_NOW, TK_TS_CPU, TK_TS_MONO, TK_TS_STRICT, TK_TS_LAST = TK_TS_STRICT };

/* Bytes before the first term: flags and tag. */
#define TK_EVENT_HEAD 2u

typedef enum {
    TK_F_TRACEE = 0,
    TK_F_TS,
    TK_F_SCHED,
    TK_F_MSR,
    TK_F_EXTRA,
    TK_F_MSG,
    TK_F_COUNT
} tk_event_field;

/* Whether field f is in a record with these flags and timestamp kind. */
static inline bool tk_event_field_present(tk_event_field f, unsigned flags,
                                          unsigned ts_kind)
{
    switch (f) {
    case TK_F_TS:
        return ts_kind != TK_TS_NONE;
    case TK_F_SCHED:
        return (flags & TK_EV_SCHED) != 0;
    case TK_F_MSR:
        return (flags & TK_EV_MSR) != 0;
    case TK_F_EXTRA:
        return (flags & TK_EV_EXTRA) != 0;
    default:
        return true;
    }
}

typedef struct {
    const unsigned char *p;
    size_t len; /* 0: the field is absent */
} tk_span;

typedef struct {
    unsigned flags;   /* TK_EV_* */
    unsigned ts_kind; /* TK_TS_* */
    unsigned tag;     /* index in tk_tags */
    tk_span field[TK_F_COUNT];
} tk_event;

/* Splits an event record into its fields and checks every term (shape,
 * lengths, nesting) without a VM. 0, or -1 if the record is malformed. */
int tk_event_parse(const void *rec, size_t len, tk_event *ev);

/* ---- reading terms ------------------------------------------------------ */

typedef struct {
    const unsigned char *p, *end;
} tk_rbuf;

static inline bool tk_get_bytes(tk_rbuf *r, void *out, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    memcpy(out, r->p, n);
    r->p += n;
    return true;
}

static inline bool tk_get_u8(tk_rbuf *r, unsigned *v)
{
    unsigned char b;
    if (!tk_get_bytes(r, &b, 1))
        return false;
    *v = b;
    return true;
}

static inline bool tk_get_u32(tk_rbuf *r, uint32_t *v)
{
    return tk_get_bytes(r, v, 4);
}

static inline bool tk_get_word(tk_rbuf *r, uint64_t *v)
{
    return tk_get_bytes(r, v, 8);
}

/* An unsigned LEB128 varint of at most 64 bits. */
static inline bool tk_get_varint(tk_rbuf *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p == r->end)
            return false;
        unsigned b = *r->p++;
        if (shift == 63 && b > 1)
            return false; /* past 64 bits */
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* A length or a count: a varint below 2^32. */
static inline bool tk_get_len(tk_rbuf *r, uint32_t *n)
{
    uint64_t v;
    if (!tk_get_varint(r, &v) || v > UINT32_MAX)
        return false;
    *n = (uint32_t)v;
    return true;
}

static inline uint64_t tk_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t tk_unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline bool tk_get_svarint(tk_rbuf *r, int64_t *v)
{
    uint64_t u;
    if (!tk_get_varint(r, &u))
        return false;
    *v = tk_unzigzag(u);
    return true;
}

/* An immediate's word from its TK_T_IMM value. */
static inline uint64_t tk_imm_word(int64_t v)
{
    return (uint64_t)v << 2 | 3u;
}

/* The words of TK_T_ATOM and TK_T_PID values and of small integers
 * (ERTS's layouts), and whether a word has them. */
#define TK_ATOM_LOW 0x0Bu /* low 6 bits */
#define TK_PID_LOW 0x3u   /* low 4 bits */
static inline uint64_t tk_atom_word(uint64_t k) { return k << 6 | TK_ATOM_LOW; }
static inline uint64_t tk_pid_word(uint64_t k) { return k << 4 | TK_PID_LOW; }
static inline bool tk_is_atom_word(uint64_t w) { return (w & 0x3f) == TK_ATOM_LOW; }
static inline bool tk_is_pid_word(uint64_t w) { return (w & 0xf) == TK_PID_LOW; }
/* A small integer's word (value << 4 | 0xF), written as TK_T_INT. */
#define TK_SMALL_LOW 0xfu /* low 4 bits */
static inline uint64_t tk_small_word(int64_t v) { return (uint64_t)v << 4 | TK_SMALL_LOW; }
static inline bool tk_is_small_word(uint64_t w) { return (w & 0xf) == TK_SMALL_LOW; }
static inline int64_t tk_small_value(uint64_t w) { return (int64_t)w >> 4; }
/* Whether a TK_T_ATOM or TK_T_PID value makes a word (no bits lost). */
static inline bool tk_atom_ok(uint64_t k) { return k < (UINT64_C(1) << 58); }
static inline bool tk_pid_ok(uint64_t k) { return k < (UINT64_C(1) << 60); }
/* A TK_T_NOW part: 0 to 2^63 - 1. */
static inline bool tk_now_ok(uint64_t k) { return k <= (uint64_t)INT64_MAX; }

/* Whether n more elements (each at least one byte) can follow. */
static inline bool tk_count_ok(const tk_rbuf *r, uint64_t n)
{
    return n <= (uint64_t)(r->end - r->p);
}

/* Steps over one term at `depth`, checking it. */
bool tk_term_skip(tk_rbuf *r, unsigned depth);

/* ---- an event record in a trace file's form ------------------------------ */

/* What an immediate word of the VM that recorded the event becomes in a
 * file: a small integer (*is_int set, its value in *ival) or an entry of
 * the file's dictionary (*index). Returns 0, or -1 if it cannot say (out
 * of memory): the record is then left out. */
typedef struct {
    int (*imm)(void *ctx, uint64_t word, int *is_int, int64_t *ival,
               uint32_t *index);
    void *ctx;
} tk_xlate;

/* Copies an event record into `out` (TK_EVENT_FILE_ROOM(len) bytes: a
 * dictionary reference may take more bytes than the word it replaces, at
 * most three times as many) with every immediate word replaced by what x
 * says, and every external term a file may not hold (tk_ext.h: nested too
 * deep) replaced by the marker. Returns the bytes written, or 0 if the
 * record is malformed or x fails. */
#define TK_EVENT_FILE_ROOM(len) (3 * (size_t)(len))
size_t tk_event_to_file(const void *rec, size_t len, unsigned char *out,
                        const tk_xlate *x);

/* A record of version 1 of the trace file format (fixed 4- and 8-byte
 * numbers, tags 2 and 13) in today's form, into `out`
 * (TK_EVENT_V1_ROOM(len) bytes). Returns the bytes written, or 0 if it is
 * not a well-formed version 1 record. */
#define TK_EVENT_V1_ROOM(len) (2 * (size_t)(len))
size_t tk_event_from_v1(const void *rec, size_t len, unsigned char *out);

/* A record in a file's form as every reader checks it (FORMAT.md): well
 * formed (tk_event_parse), each dictionary reference to an entry there is
 * (0 .. nentries-1), each external term one a file may hold (tk_ext.h).
 * On true, *refs is the bytes of the entries it refers to, entry_len[k]
 * for each reference to entry k: what the references expand it by. */
bool tk_event_file_check(const void *rec, size_t len, const uint32_t *entry_len,
                         size_t nentries, uint64_t *refs);

/* ---- writing terms ------------------------------------------------------ */

/* The writer's cursor never passes `end`; each primitive needs the room
 * it writes (callers check with tk_wroom first). */
typedef struct {
    unsigned char *p, *end;
} tk_wbuf;

static inline size_t tk_wroom(const tk_wbuf *w, const unsigned char *limit)
{
    return limit > w->p ? (size_t)(limit - w->p) : 0;
}

static inline void tk_put_u8(tk_wbuf *w, unsigned v)
{
    *w->p++ = (unsigned char)v;
}

static inline void tk_put_u32(tk_wbuf *w, uint32_t v)
{
    memcpy(w->p, &v, 4);
    w->p += 4;
}

static inline void tk_put_word(tk_wbuf *w, uint64_t v)
{
    memcpy(w->p, &v, 8);
    w->p += 8;
}

/* Bytes of v as a varint: 1 to 10, its significant bits (1 to 64) over 7
 * rounded up, computed as (bits * 9 + 64) / 64 (equal for every count of
 * bits from 1 to 64). */
static inline size_t tk_varint_len(uint64_t v)
{
    unsigned top = 63u - (unsigned)__builtin_clzll(v | 1); /* bits - 1 */
    return (top * 9 + 73) >> 6;
}

static inline void tk_put_varint(tk_wbuf *w, uint64_t v)
{
    /* Through a local pointer: a byte stored through w->p could be w->p
     * itself, so the compiler would reload it after every byte. */
    unsigned char *p = w->p;
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    w->p = p;
}

/* The varint of v (below 2^(7n)) in its n bytes (1 to 8), as the low
 * bytes of a word: for writers that append whole words. */
static inline uint64_t tk_varint_word(uint64_t v, size_t n)
{
    /* The continuation bit on every byte but the last. */
    static const uint64_t cont[9] = {
        0, 0, 0x80, 0x8080, 0x808080, 0x80808080, 0x8080808080,
        0x808080808080, 0x80808080808080};
    /* Each group of 7 bits moved to its byte (the groups past n are 0):
     * the first two (up to 2^14), two more (up to 2^28: a delta of stamps
     * less than a tenth of a second), then the last four. */
    uint64_t x = (v & 0x7f) | (v << 1 & 0x7f00);
    if (n <= 2)
        return x | (uint64_t)(n - 1) << 7;
    x |= (v << 2 & 0x7f0000) | (v << 3 & 0x7f000000);
    if (n > 4)
        x |= (v << 4 & UINT64_C(0x7f00000000)) |
             (v << 5 & UINT64_C(0x7f0000000000)) |
             (v << 6 & UINT64_C(0x7f000000000000)) |
             (v << 7 & UINT64_C(0x7f00000000000000));
    return x | cont[n];
}

/* A varint in exactly `width` bytes (1 to 10, at least tk_varint_len(v)):
 * continuation bytes pad it, so that a count can be written after what it
 * counts into a place kept for it. */
static inline void tk_put_varint_at(unsigned char *p, uint64_t v, size_t width)
{
    for (size_t i = 0; i + 1 < width; i++) {
        p[i] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[width - 1] = (unsigned char)v;
}

/* An immediate's TK_T_IMM value (its low two bits, always 11, left out). */
static inline int64_t tk_imm_value(uint64_t word)
{
    return (int64_t)word >> 2;
}

static inline void tk_put_bytes(tk_wbuf *w, const void *src, size_t n)
{
    memcpy(w->p, src, n);
    w->p += n;
}

/* Largest sizes of the parts. */
#define TK_T_WORD_SIZE 11u  /* tag + varint of 64 bits: IMM, INT (FLOAT: 9) */
#define TK_T_FLOAT_SIZE 9u
#define TK_T_HEAD_SIZE 6u   /* tag + varint of 32 bits: BIN, LIST, TUPLE, MAP, EXT, FUN */
#define TK_T_BINCUT_HEAD 16u /* tag + varint of 32 bits + varint of 64 bits */

#endif
