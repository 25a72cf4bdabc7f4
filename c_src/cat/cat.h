/* cat.h: what the rooms of tracekit-cat share.
 *
 * tracekit-cat reads trace files (FORMAT.md) without a VM. The path of an
 * event: a file's events chunk (reader.c) -> each record decoded into the
 * external term format with ei (decode.c), the very tuple OTP's process
 * tracer would have sent -> the merge of all files by time, and the
 * filters (merge.c) -> an output: the term bytes as they are (dbg.c), or
 * a tree of the term (etf.c) printed as a line of text (text.c, term.c).
 *
 * Memory: one events chunk per file, decoded; the term tree and the text
 * of one event; the dictionaries; the names registered in the trace.
 * Nothing else grows with the number of events.
 */
#ifndef TK_CAT_H
#define TK_CAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk_tfile.h"

/* Exit statuses (README.md, tracekit-cat). */
enum {
    CAT_OK = 0,
    CAT_DAMAGED = 1,  /* a damaged or cut file: the events before it were written */
    CAT_USAGE = 2,    /* bad arguments */
    CAT_NOFILE = 3,   /* a file that is missing or cannot be read */
    CAT_NOTTRACE = 4, /* a file that is not a trace file */
    CAT_OUTPUT = 5    /* the output could not be written, or memory ran out */
};

/* ---- growable memory (util.c) ------------------------------------------- */

/* Allocation that cannot fail: out of memory ends the program with a
 * line on stderr (there is nothing to go on with). */
void *xrealloc(void *p, size_t n);
void *xmalloc(size_t n);
char *xstrndup(const char *s, size_t n);
/* Grows *p (elements of `size` bytes, *cap of them) to hold `need`. */
void grow(void **p, size_t *cap, size_t need, size_t size);
#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

/* A byte string under construction. */
typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

void sb_put(sbuf *b, const void *s, size_t n);
void sb_str(sbuf *b, const char *s);
void sb_ch(sbuf *b, char c);
void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An integer in decimal. */
void sb_int(sbuf *b, int64_t v);
/* A code point as UTF-8. */
void sb_utf8(sbuf *b, uint32_t c);

/* Decodes one UTF-8 character as Erlang's /utf8 matching accepts it (no
 * overlong forms, no surrogates, at most U+10FFFF). Returns its byte
 * length and *c, or 0 if none starts at p. */
size_t utf8_next(const unsigned char *p, size_t n, uint32_t *c);

/* ---- output (out.c) ------------------------------------------------------- */

#define OUT_BUF (256u * 1024u)

/* Buffered writes to a file descriptor; the first failure is said once,
 * on stderr, and what follows is not written. */
typedef struct {
    int fd;
    size_t len;
    bool failed;
    unsigned char buf[OUT_BUF];
} output;

void out_init(output *o, int fd);
void out_write(output *o, const void *p, size_t n);
/* Flushes; false if writing failed. */
bool out_flush(output *o);

/* One line on stderr: "tracekit-cat: ...". */
void cat_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- terms as trees (etf.c) ----------------------------------------------- */

enum {
    T_NIL,
    T_INT,    /* u.i */
    T_BIG,    /* an integer beyond 64 bits: u.p, n bytes of magnitude, little
               * end first; neg */
    T_FLOAT,  /* u.f */
    T_ATOM,   /* u.p, n bytes; latin1 set for ATOM_EXT / SMALL_ATOM_EXT */
    T_BIN,    /* u.p, n bytes; bits: bits of the last byte (0: all 8) */
    T_LIST,   /* n elements, kids: n nodes then the tail */
    T_TUPLE,  /* n elements */
    T_MAP,    /* n pairs: 2n nodes, key then value */
    T_PID,    /* etf */
    T_PORT,   /* etf */
    T_REF,    /* etf */
    T_FUN,    /* a local fun: kids Module, Index, Uniq */
    T_EXPORT  /* fun M:F/A: kids M, F, A */
};

typedef struct {
    uint8_t type;
    uint8_t latin1; /* T_ATOM */
    uint8_t bits;   /* T_BIN */
    uint8_t neg;    /* T_BIG */
    uint32_t n;
    uint32_t kids;  /* containers: the index of the first child */
    union {
        int64_t i;
        double f;
        const unsigned char *p;
    } u;
    const unsigned char *etf; /* where the term's encoding starts */
    uint32_t etf_len;
} tnode;

typedef struct {
    tnode *v;
    size_t len, cap;
    /* The node that wrote the file (NUL-terminated), or NULL: its own
     * references are held to what it can make (etf.c). */
    const char *home;
} tree;

/* Parses one term of the external format (after the version byte) at
 * buf[*at] into t (appended; the root is the first node added). Returns
 * the root's index, or -1 if the bytes are not a term (as binary_to_term
 * would refuse them). */
long etf_parse(tree *t, const unsigned char *buf, size_t len, size_t *at);

/* The kid i of a container. */
static inline const tnode *kid(const tree *t, const tnode *n, uint32_t i)
{
    return &t->v[n->kids + i];
}

/* Whether n is the atom `name` (ASCII: the same bytes in either
 * encoding). */
static inline bool is_atom(const tnode *n, const char *name)
{
    uint32_t k = 0;
    if (n->type != T_ATOM)
        return false;
    while (k < n->n && name[k] != 0 && (unsigned char)name[k] == n->u.p[k])
        k++;
    return k == n->n && name[k] == 0;
}
/* The atom's text as UTF-8 into b. */
void atom_text(sbuf *b, const tnode *n);

/* Pids, ports, references: node name and numbers. */
typedef struct {
    const unsigned char *node; /* atom text */
    size_t node_len;
    bool node_latin1;
    uint32_t nid;      /* words in id[] */
    uint64_t id[5];    /* pid: num, serial; port: id; ref: the words */
} ident;
bool ident_of(const tnode *n, ident *out);

/* ---- trace files (reader.c) ----------------------------------------------- */

/* One decoded event: its time (ns, FORMAT.md "Time") and the event tuple
 * in the external term format (no version byte). */
typedef struct {
    int64_t time;
    size_t off, len; /* in the reader's event bytes */
} cat_event;

typedef struct reader {
    const char *path;
    unsigned index; /* position in the list of files: ties in time */
    tk_tread r;
    bool open;
    /* header */
    char *node;       /* the node's name (UTF-8) */
    tk_anchor ref;    /* the machine's reference anchor and rate */
    uint64_t hz;
    /* dictionary: entries as external terms without the version byte */
    unsigned char *dict;
    size_t dict_len, dict_cap;
    size_t *dict_off; /* ndict + 1 offsets */
    size_t ndict, dict_off_cap;
    /* the events of the chunk in hand, decoded: their bytes one after
     * the other in x (an ei_x_buff), and where each is */
    struct ei_x_buff_TAG *x;
    cat_event *evs;
    size_t nevs, evs_cap, next;
    tree scratch;           /* decode.c: EXT terms checked on it */
    uint64_t lost;          /* events the writer refused (lost chunks) */
    uint64_t lost_reported; /* of them, already handed to the output */
} reader;

typedef struct {
    const char *file;
    uint64_t offset;
    int status; /* CAT_* */
    char why[160];
} cat_failure;

/* The files a source names: the path itself when it is a regular file,
 * else a wrap set's files Base.N, sorted by name (as
 * tracekit_file_reader:files/1). Appends to *files; false with f set. */
bool source_files(const char *src, char ***files, size_t *n, size_t *cap,
                  cat_failure *f);

/* Opens the files and reads their headers (machines share a reference
 * anchor, as tracekit_file_reader does). false with f set. */
bool readers_open(reader *rs, size_t n, char **files, cat_failure *f);
/* Makes sure the reader has an event in hand, reading chunks: 1 when it
 * has, 0 when the file is done, -1 on a damaged chunk (f set). */
int reader_fill(reader *r, cat_failure *f);
void reader_close(reader *r);
/* Closes the reader and frees what it holds. */
void reader_free(reader *r);

/* Appends the event tuple of one record to x (decode.c): 0, or -1 if
 * the record does not decode (as tk_dec_file_event refuses it). r's
 * scratch tree is used. */
struct ei_x_buff_TAG;
int decode_event(reader *r, const unsigned char *rec, size_t len,
                 struct ei_x_buff_TAG *x);

/* ---- registered names seen in the trace (names.c) ------------------------- */

/* The names processes registered in the trace itself, by the external
 * form of the pid or port. */
typedef struct {
    struct name_slot *slots;
    size_t nslots, used;
} names;

/* Notes the name of a register event ({_, P, register, Name[, _]}) before
 * the event is shown. */
void names_note(names *nm, const tree *t, const tnode *ev);
/* The name P registered, as an atom node's text, or NULL. */
const char *names_get(const names *nm, const tnode *p);
void names_free(names *nm);

/* ---- term text (term.c) --------------------------------------------------- */

/* How terms are printed: pids, ports and references of `home` (the node
 * that recorded the event) as <0.N.S>; containers deeper than `depth`
 * as ...; nothing written once the text passes `stop` bytes (the line is
 * cut before that). */
typedef struct {
    const tree *t;
    const char *home;
    int depth;
    size_t stop;
} term_opts;

void term_text(sbuf *b, const term_opts *o, const tnode *n);
/* A term at a depth (the top term of a field is at depth 1). */
void term_text_at(sbuf *b, const term_opts *o, const tnode *n, int depth);
/* An atom, quoted when it has to be. */
void term_atom(sbuf *b, const tnode *n);

/* ---- outputs -------------------------------------------------------------- */

/* An output format: the events in the order of the merge. */
typedef struct sink sink;
struct sink {
    /* an event: the tuple's bytes (no version byte); its tree when
     * needs_tree; its time; the file it came from */
    void (*event)(sink *s, const unsigned char *etf, size_t len, const tree *t,
                  const tnode *ev, int64_t time, const reader *from);
    /* events the writer refused, before the next event of that file */
    void (*lost)(sink *s, uint64_t n, const reader *from);
    bool needs_tree;
};

/* dbg's trace port file framing. */
typedef struct {
    sink s;
    output *out;
} dbg_sink;

void dbg_sink_init(dbg_sink *d, output *out);

/* tracekit-cat's own text: one event a line (README.md). */
typedef struct {
    sink s;
    output *out;
    const names *nm;
    int depth, line_length;
    bool node_column; /* each line says its node: files of several nodes */
    sbuf line;
    int64_t second;         /* the second of the last line's time ... */
    char second_text[40];   /* ... and its text */
} text_sink;

void text_sink_init(text_sink *x, output *out, const names *nm, int depth,
                    int line_length, bool node_column);
/* The process a line of text is about: the tracee of a trace event, the
 * sender of a seq_trace send or print, the receiver of a receive; or
 * NULL. */
const tnode *event_process(const tree *t, const tnode *ev);

#endif
