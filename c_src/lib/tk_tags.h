/* tk_tags.h: the trace tags the VM hands to a tracer module, and which
 * part of each event is user data.
 *
 * Records store a tag as its index in this table (one byte), so that a
 * record never holds a term the tracer was not meant to keep, and so that
 * a reader without a VM can name the tag. The table is the one list of
 * tags in tracekit: the NIF libraries turn it into atoms when they load,
 * and Erlang asks them for it (tracekit_ring:tags/0).
 */
#ifndef TK_TAGS_H
#define TK_TAGS_H

/* Which part of an event is user data (messages, arguments, return
 * values), which the payload modes shorten. */
typedef enum {
    TK_PART_NONE = 0, /* nothing: pids, names, MFAs, GC info */
    TK_PART_MSG,      /* the trace term itself (message, exit reason) */
    TK_PART_ARGS,     /* the argument list in the {M, F, Args} trace term */
    TK_PART_EXTRA,    /* the extra term (return value) */
    TK_PART_EXC,      /* the value in the {Class, Value} extra term */
    TK_PART_SPAWN,    /* the argument list in the {M, F, Args} extra term */
    TK_PART_SEQ       /* the last element of the seq_trace info tuple */
} tk_part;

/* Every tag the VM emits (OTP 27 to 29), with its user-data part:
 * X(name, part), the name being the atom's text. */
#define TK_TAG_LIST(X)                                                      \
    X(send, TK_PART_MSG)                                                  \
    X(send_to_non_existing_process, TK_PART_MSG)                          \
    X(receive, TK_PART_MSG)                                               \
    X(call, TK_PART_ARGS)                                                 \
    X(return_from, TK_PART_EXTRA)                                         \
    X(exception_from, TK_PART_EXC)                                        \
    X(return_to, TK_PART_NONE)                                            \
    X(spawn, TK_PART_SPAWN)                                               \
    X(spawned, TK_PART_SPAWN)                                             \
    X(exit, TK_PART_MSG)                                                  \
    X(link, TK_PART_NONE)                                                 \
    X(unlink, TK_PART_NONE)                                               \
    X(getting_linked, TK_PART_NONE)                                       \
    X(getting_unlinked, TK_PART_NONE)                                     \
    X(register, TK_PART_NONE)                                             \
    X(unregister, TK_PART_NONE)                                           \
    X(in, TK_PART_NONE)                                                   \
    X(out, TK_PART_NONE)                                                  \
    X(in_exiting, TK_PART_NONE)                                           \
    X(out_exiting, TK_PART_NONE)                                          \
    X(out_exited, TK_PART_NONE)                                           \
    X(gc_major_start, TK_PART_NONE)                                       \
    X(gc_major_end, TK_PART_NONE)                                         \
    X(gc_minor_start, TK_PART_NONE)                                       \
    X(gc_minor_end, TK_PART_NONE)                                         \
    X(open, TK_PART_NONE)                                                 \
    X(closed, TK_PART_MSG)                                                \
    X(seq_trace, TK_PART_SEQ)

/* Tag indexes: TK_TAG_send, TK_TAG_receive, ..., and their count. */
#define TK_TAG_ENUM(name, part) TK_TAG_##name,
enum { TK_TAG_LIST(TK_TAG_ENUM) TK_TAG_COUNT };
#undef TK_TAG_ENUM

typedef struct {
    const char *name;
    tk_part part;
} tk_tag;

extern const tk_tag tk_tags[TK_TAG_COUNT];

/* A set of tags is a 64-bit mask over their indexes. */
_Static_assert(TK_TAG_COUNT <= 64, "tag sets are 64-bit masks");
typedef unsigned long long tk_tagset;
#define TK_TAGSET_ALL ((tk_tagset)((1ull << TK_TAG_COUNT) - 1))

#endif
