/* cat.h: what the rooms of tracekit-cat share.
 *
 * tracekit-cat reads trace files (FORMAT.md) without a VM. The path of an
 * event: a file's events chunk (reader.c) -> each record decoded into the
 * external term format with ei (decode.c), the very tuple OTP's process
 * tracer would have sent -> the merge of all files by time (merge.c) ->
 * an output format: the term bytes as they are (dbg.c), or a tree of the
 * term (etf.c) that the text and JSON formats walk.
 *
 * Memory: one events chunk per file, decoded; the term tree and the text
 * of one event; the dictionaries. Nothing grows with the number of events
 * (the registered names of the text format grow with the names seen).
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
/* A code point as UTF-8. */
void sb_utf8(sbuf *b, uint32_t c);

/* Decodes one UTF-8 character as Erlang's /utf8 matching accepts it (no
 * overlong forms, no surrogates, at most U+10FFFF). Returns its byte
 * length and *c, or 0 if none starts at p. */
size_t utf8_next(const unsigned char *p, size_t n, uint32_t *c);
/* Code points in a UTF-8 text (bytes that do not decode count one each). */
size_t utf8_count(const char *p, size_t n);

/* ---- output (out.c) ------------------------------------------------------- */

void out_open(int fd);
void out_write(const void *p, size_t n);
void out_str(const char *s);
/* Flushes; false if writing failed (reported once, on stderr). */
bool out_flush(void);
bool out_failed(void);

void die_errno(const char *what);
void cat_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- terms as trees (etf.c) ----------------------------------------------- */

enum {
    T_NIL,
    T_INT,   /* u.i */
    T_BIG,   /* etf: SMALL_BIG_EXT / LARGE_BIG_EXT */
    T_FLOAT, /* u.f */
    T_ATOM,  /* u.p, n bytes; latin1 set for ATOM_EXT / SMALL_ATOM_EXT */
    T_BIN,   /* u.p, n bytes; bits: bits of the last byte (0: all 8) */
    T_LIST,  /* n elements, kids: n nodes then the tail */
    T_TUPLE, /* n elements */
    T_MAP,   /* n pairs: 2n nodes, key then value */
    T_PID,   /* etf */
    T_PORT,  /* etf */
    T_REF,   /* etf */
    T_FUN    /* etf */
};

typedef struct {
    uint8_t type;
    uint8_t latin1; /* T_ATOM */
    uint8_t bits;   /* T_BIN */
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

/* Whether n is the atom `name`. */
bool is_atom(const tnode *n, const char *name);
/* The atom's text as UTF-8 into b. */
void atom_text(sbuf *b, const tnode *n);

/* Pids, ports, references: node name and numbers. */
typedef struct {
    const unsigned char *node; /* atom text */
    size_t node_len;
    bool node_latin1;
    uint32_t creation;
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
    char *machine;    /* what files of one machine share (FORMAT.md) */
    size_t machine_len;
    tk_anchor ref;    /* the machine's reference anchor and rate */
    uint64_t hz;
    /* dictionary: entries as external terms without the version byte */
    unsigned char *dict;
    size_t dict_len, dict_cap;
    size_t *dict_off; /* ndict + 1 offsets */
    size_t ndict, dict_off_cap;
    uint32_t *dict_lens; /* each entry's length in the file (version byte too) */
    size_t dict_lens_cap;
    /* the events of the chunk in hand, decoded: their bytes one after
     * the other in x (an ei_x_buff), and where each is */
    struct ei_x_buff_TAG *x;
    cat_event *evs;
    size_t nevs, evs_cap, next;
    uint64_t lost;          /* events the writer refused (lost chunks) */
    uint64_t lost_reported; /* of them, already handed to the output */
    bool ended;             /* the end chunk was read (FORMAT.md) */
    struct cat_skips *skips; /* --damaged skip: where regions go; NULL: stop */
} reader;

/* --damaged skip: the regions read over, in the order they were found,
 * as tracekit_file:fold/4 lists them ({File, From, To | eof}). */
typedef struct {
    const char *file;
    uint64_t from, to;
    bool to_end; /* to the end of the file */
} cat_skip;

typedef struct cat_skips {
    cat_skip *v;
    size_t n, cap;
} cat_skips;

typedef struct {
    const char *file;
    uint64_t offset;
    int status; /* CAT_* */
    int err;    /* CAT_NOFILE: the errno of the open, or -1: no such file or wrap set */
    char why[160];
} cat_failure;

/* The files a source names: the path itself when it is a regular file,
 * else a wrap set's files Base.N, sorted by name (as
 * tracekit_file_reader:files/1). Appends to *files; false with f set. */
bool source_files(const char *src, char ***files, size_t *n, size_t *cap,
                  cat_failure *f);

/* Opens the files and reads their headers (machines share a reference
 * anchor, as tracekit_file_reader does). false with f set. With skips
 * (--damaged skip), a file without a good header is read on from its next
 * good chunk, and the region goes to skips. */
bool readers_open(reader *rs, size_t n, char **files, cat_skips *skips,
                  cat_failure *f);
/* Makes sure the reader has an event in hand, reading chunks: 1 when it
 * has, 0 when the file is done, -1 on a damaged chunk or a file cut short
 * (without its end chunk) (f set). With skips, damage is read over and
 * noted there instead. */
int reader_fill(reader *r, cat_failure *f);
void reader_close(reader *r);

/* Appends the event tuple of one record to x (decode.c): 0, or -1 if
 * the record does not decode (as tk_dec_file_event refuses it). */
struct ei_x_buff_TAG;
int decode_event(const reader *r, const unsigned char *rec, size_t len,
                 struct ei_x_buff_TAG *x);

/* ---- the outputs ----------------------------------------------------------- */

typedef struct {
    int depth, line_length;
    const char *local_node; /* whose pids print as <0.N.S>; NULL: none */
    /* the registered name shown beside a pid (~tw), or NULL; NULL here:
     * the names of names.c */
    const char *(*names)(const tree *t, const tnode *p);
} text_opts;

typedef struct sink {
    /* an event: the tuple's bytes (no version byte), its tree, its time,
     * the node that recorded it */
    void (*event)(struct sink *s, const unsigned char *etf, size_t len,
                  const tree *t, const tnode *ev, int64_t time, const char *node);
    /* events the writer refused, before the next event */
    void (*lost)(struct sink *s, uint64_t n);
    void (*finish)(struct sink *s);
    bool needs_tree;
} sink;

sink *text_sink(const text_opts *o);
/* One event in the shell's one-line format, cut at the line length, into
 * b (emptied first), no newline. */
void text_line(sbuf *b, const tree *t, const tnode *ev, const text_opts *o);
/* A timestamp as tracekit_format:time/1 shows it. */
void text_time(sbuf *b, const tree *t, const tnode *stamp, const text_opts *o);
/* ---- registered names seen in the trace (names.c) ------------------------- */

/* Notes the name of a register event ({_, P, register, Name[, _]}, as
 * tracekit_file:format/2 does) before the event is shown. */
void names_note(const tree *t, const tnode *ev, const text_opts *o);
/* The name of P printed (~tw), or NULL. */
const char *names_get(const tnode *p);
sink *dbg_sink(void);
/* The report (html.c) is told why reading stopped before it is finished. */
void html_failed(const cat_failure *f);
/* jsonl, chrome, folded (EXPORTS.md); NULL with an error printed when
 * the format cannot be written. */
sink *export_sink(int format, const text_opts *o);

/* The text of one term as tracekit_format:term/2 prints it (~0tP with a
 * depth and a character limit) (pretty.c). */
void pretty_term(sbuf *b, const tree *t, const tnode *n, int depth, int limit,
                 bool unicode, const text_opts *o);
/* ~w and ~tw (io_lib:write/1 with no depth). */
void write_term(sbuf *b, const tree *t, const tnode *n, bool unicode,
                const text_opts *o);
/* An atom as io_lib:write_atom (unicode) or write_atom_as_latin1. */
void write_atom(sbuf *b, const tnode *n, bool unicode);
/* A float as io_lib_format:fwrite_g/1 (float_to_list(F, [short])). */
void write_float(sbuf *b, double f);
/* An integer of any size in decimal. */
void write_int(sbuf *b, const tnode *n);

#endif
