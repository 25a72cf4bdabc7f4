/* tk_codec.h: trace events into records and back, for the tracer NIFs.
 *
 * The record format is tk_term.h's (plain C, readable without a VM). This
 * is the VM side of it: the encoder takes the terms a tracer callback gets
 * (they live on the tracee's heap, so they must be copied before the
 * callback returns), the decoder builds the terms OTP's process tracer
 * would have sent.
 *
 * Files: tk_codec.c (tags and atoms), tk_enc.c (encoder), tk_dec.c
 * (decoder), tk_scratch.c (per-thread encoding buffers).
 */
#ifndef TK_CODEC_H
#define TK_CODEC_H

#include <erl_nif.h>
#include <stdbool.h>
#include <stddef.h>

#include "tk_keymap.h"
#include "tk_tags.h"
#include "tk_term.h"

/* What a library needs to encode and decode events: made when it loads,
 * kept in its private data, never changed afterwards. */
typedef struct {
    ERL_NIF_TERM tag[TK_TAG_COUNT]; /* tag index -> atom */
    tk_keymap atoms;                /* atom -> slot ... */
    unsigned char slot_tag[TK_KEYMAP_CAP]; /* ... -> tag index */
    ERL_NIF_TERM am_trace, am_trace_ts, am_seq_trace, am_ellipsis, am_fun;
    ERL_NIF_TERM am_timestamp, am_cpu_timestamp, am_monotonic,
        am_strict_monotonic;
    /* Whether terms whose two low bits are 11 are immediates (atoms,
     * small integers, [], local pids and ports): ERTS's representation
     * since long before OTP 27, but not an API, so it is checked when the
     * library loads and used only if the check passed. */
    bool imm_ok;
    /* Whether atoms, small integers and local pids have the layouts of
     * tk_term.h (checked the same way): then atoms and pids are written
     * as TK_T_ATOM and TK_T_PID, small integers as TK_T_INT, in fewer
     * bytes than their words. */
    bool words_ok;
} tk_codec;

/* 0, or -1 when the atoms could not be made. */
int tk_codec_init(tk_codec *c, ErlNifEnv *env);

/* The tag index of an atom, or -1 if it is not a trace tag (or not an
 * atom at all). */
static inline int tk_codec_tag(const tk_codec *c, ERL_NIF_TERM t)
{
    int slot = tk_keymap_find(&c->atoms, (uint64_t)t);
    return slot < 0 ? -1 : c->slot_tag[slot];
}

/* A set of tags from a proper list of tag atoms (`true': all tags). 0, or
 * -1 if the term is anything else. */
int tk_codec_tagset(const tk_codec *c, ErlNifEnv *env, ERL_NIF_TERM t,
                    tk_tagset *out);
/* The list of tag atoms of a set. */
ERL_NIF_TERM tk_codec_tag_list(const tk_codec *c, ErlNifEnv *env,
                               tk_tagset set);

/* ---- payload modes ------------------------------------------------------- */

typedef enum {
    TK_PAYLOAD_FULL = 0, /* everything, up to the record's room */
    TK_PAYLOAD_NONE,     /* user data becomes '...', arguments their count */
    TK_PAYLOAD_MAX       /* each user-data term cut to about max_bytes */
} tk_payload_mode;

/* Largest max_bytes accepted (bytes of one term). */
#define TK_PAYLOAD_MAX_BYTES (1u << 30)

typedef struct {
    tk_payload_mode mode;
    size_t max_bytes; /* TK_PAYLOAD_MAX */
    /* Budget modes: integers of at least this magnitude are cut without
     * being serialised (a process-independent environment holds them). */
    ErlNifEnv *big_env;
    ERL_NIF_TERM big_pos, big_neg;
} tk_payload;

/* 0, or -1 when out of memory. */
int tk_payload_init(tk_payload *p, tk_payload_mode mode, size_t max_bytes);
void tk_payload_destroy(tk_payload *p);

/* ---- encoding ------------------------------------------------------------ */

/* One event as a tracer callback gets it. Absent terms are 0. */
typedef struct {
    unsigned tag;        /* tag index */
    unsigned ts_kind;    /* TK_TS_* */
    ERL_NIF_TERM tracee; /* seq_trace: the label */
    ERL_NIF_TERM ts;     /* made by the tracer, of kind ts_kind */
    ERL_NIF_TERM sched, msr, extra;
    ERL_NIF_TERM msg;    /* the trace term; seq_trace: the info */
} tk_event_in;

/* Encodes an event record into buf (cap bytes, at least
 * TK_EVENT_MIN_ROOM). Never writes past cap; what does not fit becomes the
 * marker. Returns the bytes written; *short_of_room tells whether
 * something was cut for want of room (rather than by the payload mode). */
#define TK_EVENT_MIN_ROOM 64u
size_t tk_enc_event(ErlNifEnv *env, const tk_codec *c, const tk_payload *pl,
                    const tk_event_in *ev, unsigned char *buf, size_t cap,
                    bool *short_of_room);

/* ---- decoding ------------------------------------------------------------ */

/* Builds the process tracer's term of an event record: 1, or 0 if the
 * record does not decode (tk_event_parse refuses it, or its external
 * terms are corrupt). */
int tk_dec_event(ErlNifEnv *env, const tk_codec *c, const void *rec,
                 size_t len, ERL_NIF_TERM *out);

/* The same for an event record in a trace file's form, whose dictionary
 * entries are dict[0 .. ndict): terms of any environment, copied into env
 * where the record uses them. */
int tk_dec_file_event(ErlNifEnv *env, const tk_codec *c, const void *rec,
                      size_t len, const ERL_NIF_TERM *dict, size_t ndict,
                      ERL_NIF_TERM *out);

#endif
