/* file.h: the tracekit_file NIF library: a tracer that streams events to
 * a trace file (FORMAT.md) or a wrap set of files.
 *
 * The hot path is the recorders' (tk_recorder.h): events go into
 * per-thread rings. A writer thread of the file's own (enif_thread_create,
 * never a scheduler) takes them out in time order (tk_merge), turns the
 * VM's words in them into dictionary entries, and writes chunks. A slow
 * disk fills the rings, and a full ring refuses events in enabled_*, where
 * they are counted: schedulers never wait for the disk, and memory stays
 * the rings'.
 *
 * Files: file_nif.c (load, new, stats, flush, close, the callbacks),
 * writer.c (the writer thread), reader.c (trace files read chunk by
 * chunk, for tracekit_file_reader).
 */
#ifndef TK_FILE_NIF_H
#define TK_FILE_NIF_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tk_limit.h"
#include "tk_merge.h"
#include "tk_recorder.h"
#include "tk_tfile.h"
#include "tk_u64map.h"

#define FILE_ATOMS(X)                                                       \
    X(error) X(enomem) X(written) X(dropped) X(bytes) X(files)             \
    X(write_errors) X(buffered) X(filtered) X(truncated) X(producers)      \
    X(size) X(closed) X(paused) X(sample) X(tags) X(all) X(path) X(file)   \
    X(last_error) X(none) X(format) X(node) X(otp_release) X(tracekit)     \
    X(stamp) X(tsc) X(monotonic) X(anchor) X(sequence) X(wrap) X(on_disk)  \
    X(over) X(limit) X(max_events) X(rate) X(eof) X(corrupt)             \
    X(not_a_trace) X(bad_chunk) X(buffer) X(payload) X(payload_max)       \
    X(meta) X(mode) X(overwritten) X(cut) X(header) X(dict) X(events)    \
    X(lost) X(end) X(later)

/* The smallest max_bytes: a header and the chunks that end a file fit. */
#define TK_FILE_MAX_BYTES_MIN 4096u

/* The longest span of a rate limit: a day. */
#define TK_FILE_RATE_MS_MAX 86400000u

struct file_core;

/* Writers whose resource was freed before close/1 joined them (each ends
 * the file on its own). One list for every version of the library loaded
 * since the first: an upgrade takes it over, so that whichever version
 * runs joins the writers of the others once they have ended. */
typedef struct {
    ErlNifMutex *lock;
    struct file_core *head;
    _Atomic long users; /* library versions holding it */
} file_orphans;

typedef struct {
    tk_recorder_lib rec;
    ErlNifResourceType *file_type;
    ErlNifResourceType *reader_type;
    /* A resource type of this file's mapping of the library alone (its
     * name holds the address of its code): never taken over by a library
     * loaded from another file, and held by each writer thread this
     * library started until the thread has been joined. A library is
     * unloaded only when no resource of a type it owns is left, so that
     * its code outlives its threads (see file_writer_start). */
    ErlNifResourceType *keeper_type;
    file_orphans *orphans;
#define FILE_ATOM_FIELD(a) ERL_NIF_TERM am_##a;
    FILE_ATOMS(FILE_ATOM_FIELD)
#undef FILE_ATOM_FIELD
} file_lib;

/* The writer thread's own state. */
typedef struct {
    tk_tfile tf;
    tk_merge merge;
    tk_bytes events, dict;  /* the chunks being built */
    uint32_t nevents;       /* records in `events` */
    uint32_t dict_first;    /* the number of dict's first entry */
    uint32_t dict_next;     /* the number of the next new entry */
    tk_u64map words;        /* VM word -> entry number, in this file */
    uint32_t *lens;         /* entry number -> its bytes, in this file */
    size_t lens_cap;
    tk_bytes one;           /* a record set aside while its chunk's
                               predecessor is written */
    uint64_t expand;        /* what the references of `events` stand for */
    uint64_t rec_refs;      /* ... of the record being added (imm_map) */
    tk_anchor last_anchor;  /* the previous chunk's (or the header's) */
    uint64_t lost_noted;    /* refusals already written in lost chunks */
    uint64_t last_write_ns; /* when the last events chunk was written */
    size_t chunk_target;    /* bytes of a full events chunk */
    uint64_t max_total;     /* max_bytes (0: none); tf.max_bytes is per chunk type */
    tk_limit limit;         /* max_events and rate, on record stamps */
    uint64_t *file_events;  /* wrap set: events in each file of the set */
    bool need_header;       /* the open file has no header chunk yet */
    ErlNifEnv *env;         /* the header's kept terms below */
    ErlNifEnv *tmp;         /* terms made for one chunk, then cleared */
    ERL_NIF_TERM node, otp_release, version, wrap, tags; /* in env */
} file_writer;

/* A file: what the writer thread uses. It is not the resource but held
 * by it (file_res), so that a resource freed while its writer still works
 * does not wait for the writer: the writer ends the file and exits on its
 * own, and the state is freed when the thread is joined (file_writer_reap). */
typedef struct file_core {
    tk_recorder *rec;

    /* Between callers (flush, close) and the writer thread, under lock. */
    ErlNifMutex *lock;
    ErlNifCond *cond;
    bool stop;            /* close: drain, end the file, exit */
    uint64_t flush_asked; /* flush requests made ... */
    uint64_t flush_done;  /* ... and completed (all recorded before on disk) */
    bool thread_started, thread_exited;
    bool joined;            /* by close/1 */
    ErlNifTid tid;
    void *keeper;           /* held while the thread may run (keeper_type) */
    struct file_core *next; /* in the list of writers left by freed resources */

    /* Counters of the writer, read by stats/1. */
    _Atomic uint64_t on_disk;   /* events written to the files ... */
    _Atomic uint64_t overwritten; /* ... of them, in files wrapping reused */
    _Atomic uint64_t refused;   /* events the writer could not write */
    _Atomic uint64_t over;      /* events after a limit was reached */
    _Atomic int limit_reached;  /* TK_LIMIT_NONE, _MAX or _RATE */
    uint64_t max_events;        /* the limits asked for (0: none) */
    uint32_t rate_n, rate_ms;
    _Atomic uint64_t bytes, files, write_errors;
    _Atomic int last_errno;

    char *path;
    file_writer w; /* the writer thread's only */
} file_core;

/* The resource: the tracer state the callbacks get, which starts with its
 * recorder (TK_RECORDER_CALLBACKS). */
typedef struct {
    tk_recorder *rec;
    file_core *core;
} file_res;

/* writer.c */
int file_writer_start(file_lib *lib, file_core *f);
/* Asks the writer for a flush and waits for it: returns once every event
 * recorded before the call is in the file. */
void file_writer_flush(file_core *f);
/* Stops the writer (it drains, ends the file and exits) and waits for it. */
void file_writer_stop(file_core *f);
/* The resource is gone: the writer stops, drains, ends the file and exits
 * without anybody waiting; file_writer_reap frees it afterwards. Without a
 * writer, frees f now. */
void file_writer_orphan(file_orphans *o, file_core *f);
/* Joins and frees the writers left by file_writer_orphan that have exited
 * (all of them, waiting for those still working, when `all`). */
void file_writer_reap(file_orphans *o, bool all);
/* The orphans list of a first load (NULL when out of memory), one more
 * user of it (an upgrade), one less (an unload: freed by the last). */
file_orphans *file_orphans_new(void);
void file_orphans_use(file_orphans *o);
void file_orphans_drop(file_orphans *o);
/* Frees f (its writer stopped and joined, or never started). */
void file_core_free(file_core *f);

/* reader.c: the reader resource type, and the NIFs of reading. */
int file_reader_init(file_lib *lib, ErlNifEnv *env, ErlNifResourceFlags flags);
ERL_NIF_TERM file_reader_open_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM file_reader_next_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM file_reader_resync_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM file_reader_close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM file_reader_dict_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM file_reader_events_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
#define FILE_READER_FUNCS                                                   \
    {"reader_open", 1, file_reader_open_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},   \
    {"reader_next", 1, file_reader_next_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},   \
    {"reader_resync", 1, file_reader_resync_nif, ERL_NIF_DIRTY_JOB_IO_BOUND}, \
    {"reader_close", 1, file_reader_close_nif, ERL_NIF_DIRTY_JOB_IO_BOUND}, \
    {"reader_dict", 2, file_reader_dict_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},  \
    {"reader_events", 3, file_reader_events_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND}

#endif
