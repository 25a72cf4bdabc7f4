/* writer.c: the writer thread of a trace file.
 *
 * It takes records out of the recorder's rings in time order, rewrites
 * each into a file's form (the VM's words become integers or dictionary
 * entries: tk_event_to_file) into the events chunk being built, and writes
 * a chunk, after the dictionary entries its records use, when it is full
 * or has waited long enough. It alone touches the file and the writer
 * state; flush and close ask it through the lock and wait for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "tk_clock.h"
#include "tk_mem.h"

#define CHUNK_MAX (256 * 1024) /* bytes of a full events chunk */
#define CHUNK_MIN (4 * 1024)
#define WRITE_AFTER_NS 100000000ull /* a waiting chunk goes out after 100 ms */
#define IDLE_NS 2000000             /* a round that found little sleeps 2 ms */

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static tk_anchor anchor_now(void)
{
    return (tk_anchor){tk_clock_stamp(), now_ns(CLOCK_REALTIME)};
}

static void note_error(file_core *f)
{
    atomic_store(&f->write_errors, f->w.tf.write_errors);
    atomic_store(&f->last_errno, f->w.tf.last_errno);
    atomic_store(&f->bytes, f->w.tf.total);
}

/* Under max_bytes, the last bytes are kept for the chunks that end a
 * file: a file that reached its size and was closed still ends with its
 * end chunk (FORMAT.md: without it, a file was cut short), after one lost
 * chunk that says how much did not fit. The end chunk's map of four
 * counters takes under 100 bytes. */
#define END_ROOM 128u
#define LOST_ROOM (TK_CHUNK_HEAD + 16u)
/* An end chunk, a magic and a header (a map of eleven keys, the tags'
 * names among them: about 700 bytes, under 2 KiB with a node name of 255
 * characters of 4 bytes). */
#define ROTATE_ROOM (END_ROOM + TK_TFILE_MAGIC_LEN + 4096u)

static int write_header(file_core *f);

/* Writes a chunk, leaving `reserve` bytes of max_bytes unused; 0 when
 * written. Counts what the file layer counted. A file's first chunk is
 * its header: one that could not be written when the file was made is
 * written first. */
static int put_chunk(file_core *f, unsigned type, const void *p, size_t len,
                     uint64_t reserve)
{
    file_writer *w = &f->w;
    if (type != TK_CHUNK_HEADER && w->need_header && write_header(f) != 0)
        return -1;
    if (w->max_total != 0)
        w->tf.max_bytes = w->max_total - reserve;
    int rc = tk_tfile_chunk(&w->tf, type, p, len);
    note_error(f);
    return rc;
}

/* The chunks that end the last file use the room kept for them. */
static int chunk(file_core *f, unsigned type, const void *p, size_t len)
{
    return put_chunk(f, type, p, len,
                     type == TK_CHUNK_END    ? 0
                     : type == TK_CHUNK_LOST ? END_ROOM
                                             : END_ROOM + LOST_ROOM);
}

static void write_end(file_core *f, bool last);

/* The machine's boot id: stamps of files with the same one (and the same
 * clock) are on one scale. */
static ERL_NIF_TERM machine(ErlNifEnv *env)
{
    char id[64] = "";
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (fp != NULL) {
        if (fgets(id, sizeof id, fp) == NULL)
            id[0] = 0;
        fclose(fp);
    }
    size_t n = strcspn(id, "\n");
    ERL_NIF_TERM bin;
    memcpy(enif_make_new_binary(env, n, &bin), id, n);
    return bin;
}

/* The header chunk of the open file (FORMAT.md): an external-format map. */
static int write_header(file_core *f)
{
    file_writer *w = &f->w;
    ErlNifEnv *env = w->tmp;
    w->last_anchor = anchor_now();
    ERL_NIF_TERM keys[] = {
        enif_make_atom(env, "format"), enif_make_atom(env, "node"),
        enif_make_atom(env, "otp_release"), enif_make_atom(env, "tracekit"),
        enif_make_atom(env, "stamp"), enif_make_atom(env, "stamp_hz"),
        enif_make_atom(env, "machine"), enif_make_atom(env, "anchor"),
        enif_make_atom(env, "sequence"), enif_make_atom(env, "wrap"),
        enif_make_atom(env, "tags")};
    ERL_NIF_TERM vals[] = {
        enif_make_int(env, TK_TFILE_VERSION), enif_make_copy(env, w->node),
        enif_make_copy(env, w->otp_release), enif_make_copy(env, w->version),
        enif_make_atom(env, tk_clock_tsc ? "tsc" : "monotonic"),
        enif_make_uint64(env, tk_clock_hz()), machine(env),
        enif_make_tuple2(env, enif_make_uint64(env, w->last_anchor.stamp),
                         enif_make_uint64(env, w->last_anchor.system)),
        enif_make_uint64(env, w->tf.seq), enif_make_copy(env, w->wrap),
        enif_make_copy(env, w->tags)};
    ERL_NIF_TERM map;
    ErlNifBinary bin;
    int rc = -1;
    if (enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map) &&
        enif_term_to_binary(env, map, &bin)) {
        rc = chunk(f, TK_CHUNK_HEADER, bin.data, bin.size);
        enif_release_binary(&bin);
    }
    enif_clear_env(env);
    if (rc == 0)
        w->need_header = false;
    return rc;
}

/* Forgets the entries added since the last dictionary chunk (their
 * numbers are given again; those of the file are added again when used). */
static void forget_new_entries(file_writer *w)
{
    tk_u64map_clear(&w->words);
    w->dict_next = w->dict_first;
    tk_dict_start(&w->dict, w->dict_first);
}

/* A new file of the set has begun: its dictionary starts empty. */
static void new_dictionary(file_writer *w)
{
    w->dict_first = 0;
    forget_new_entries(w);
}

/* ---- records into chunks --------------------------------------------------------- */

/* Room for the length of entry dict_next. 0, or -1 when out of memory. */
static int lens_reserve(file_writer *w)
{
    if (w->dict_next < w->lens_cap)
        return 0;
    size_t cap = w->lens_cap ? 2 * w->lens_cap : 1024;
    uint32_t *l = tk_mem_realloc(w->lens, w->lens_cap * sizeof *l, cap * sizeof *l);
    if (l == NULL)
        return -1;
    w->lens = l;
    w->lens_cap = cap;
    return 0;
}

/* A VM word in a record: an integer, or the file's dictionary entry for
 * it (added on its first use in this file). */
static int imm_map(void *ctx, uint64_t word, int *is_int, int64_t *ival,
                   uint32_t *index)
{
    file_writer *w = ctx;
    ERL_NIF_TERM t = (ERL_NIF_TERM)word;
    ErlNifSInt64 i;
    if (enif_get_int64(w->env, t, &i)) {
        *is_int = 1;
        *ival = i;
        return 0;
    }
    if (tk_u64map_get(&w->words, word, index)) {
        w->rec_refs += w->lens[*index];
        return 0;
    }
    ErlNifBinary bin;
    if (!enif_term_to_binary(w->env, t, &bin))
        return -1;
    int rc = -1;
    if (tk_bytes_reserve(&w->dict, 4 + bin.size) == 0 && lens_reserve(w) == 0 &&
        tk_u64map_put(&w->words, word, w->dict_next) == 0) {
        (void)tk_dict_add(&w->dict, bin.data, bin.size); /* room reserved */
        w->lens[w->dict_next] = (uint32_t)bin.size;
        w->rec_refs += bin.size;
        *index = w->dict_next++;
        rc = 0;
    }
    enif_release_binary(&bin);
    return rc;
}

/* The bytes of data chunks that max_bytes still allows (SIZE_MAX: no
 * limit). */
static size_t data_room(const file_core *f)
{
    const file_writer *w = &f->w;
    if (w->max_total == 0)
        return SIZE_MAX;
    uint64_t limit = w->max_total - END_ROOM - LOST_ROOM;
    return limit > w->tf.total ? (size_t)(limit - w->tf.total) : 0;
}

/* The most a record of len bytes can add to the dictionary: one entry per
 * VM word (each at least 2 bytes of the record), an entry at most a
 * 255-character atom in UTF-8 or a pid of a node with such a name. */
#define DICT_ENTRY_MAX 1100u
static size_t dict_worst(size_t len)
{
    return (len / 2 + 1) * DICT_ENTRY_MAX;
}

/* The chunk being built, and its dictionary chunk, in bytes of the file. */
static size_t built(const file_writer *w)
{
    return 2 * TK_CHUNK_HEAD + w->events.len + w->dict.len;
}

/* Writes the chunk being built (and the dictionary entries before it),
 * then starts the next one. 0, or what the write of a chunk answered. */
static int write_chunks(file_core *f)
{
    file_writer *w = &f->w;
    if (w->nevents == 0)
        return 0;
    /* Both chunks, or neither: a dictionary chunk without its events
     * would only take room. */
    int rc = built(w) > data_room(f) ? 1 : 0;
    if (rc == 0 && w->dict_next > w->dict_first) {
        tk_dict_finish(&w->dict, w->dict_next - w->dict_first);
        rc = chunk(f, TK_CHUNK_DICT, w->dict.p, w->dict.len);
    }
    if (rc != 0 && w->dict_next > w->dict_first) {
        /* Entries that did not reach the file are forgotten, so that
         * later records add them again; numbers stay dense. */
        forget_new_entries(w);
    }
    if (rc == 0) {
        tk_anchor a = anchor_now();
        tk_events_finish(&w->events, a, w->nevents);
        rc = chunk(f, TK_CHUNK_EVENTS, w->events.p, w->events.len);
        w->last_anchor = a;
    }
    if (rc == 0) {
        atomic_fetch_add(&f->on_disk, w->nevents);
        if (w->file_events != NULL)
            w->file_events[w->tf.seq % w->tf.count] += w->nevents;
    } else
        atomic_fetch_add(&f->refused, w->nevents);
    w->dict_first = w->dict_next;
    tk_dict_start(&w->dict, w->dict_first);
    tk_events_start(&w->events);
    w->nevents = 0;
    w->expand = 0;
    w->last_write_ns = now_ns(CLOCK_MONOTONIC);
    return rc;
}

/* A lost chunk for the events refused since the last one. */
static void note_lost(file_core *f)
{
    tk_recorder_stats s;
    tk_recorder_stats_get(f->rec, &s);
    uint64_t total = s.dropped + atomic_load(&f->refused);
    if (total <= f->w.lost_noted)
        return;
    unsigned char p[16];
    tk_lost_make(p, total - f->w.lost_noted, tk_clock_stamp());
    if (chunk(f, TK_CHUNK_LOST, p, sizeof p) == 0)
        f->w.lost_noted = total;
}

/* Before the first record of a chunk: in a wrap set, the next file when
 * this one has no room for a full chunk. */
static void maybe_rotate(file_core *f)
{
    file_writer *w = &f->w;
    if (w->tf.file_bytes == 0 || tk_tfile_room(&w->tf) >= w->chunk_target + 2 * TK_CHUNK_HEAD)
        return;
    /* Under max_bytes, a new file needs room for the end chunk of the one
     * it follows, its magic and its header: without it the set stays in
     * this file, whose chunks that end it have their room kept. (A new
     * file without its header, or an old one without its end chunk, would
     * read as damaged.) */
    if (data_room(f) < ROTATE_ROOM)
        return;
    /* The next file takes the place of the oldest: its events are gone. */
    uint64_t *reused = &w->file_events[(w->tf.seq + 1) % w->tf.count];
    atomic_fetch_add(&f->overwritten, *reused);
    *reused = 0;
    /* Every file a writer closes ends with its end chunk (FORMAT.md): a
     * file of a set without one was cut short too. */
    if (w->tf.fd >= 0)
        write_end(f, false);
    int rc = tk_tfile_rotate(&w->tf);
    note_error(f);
    new_dictionary(w);
    atomic_fetch_add(&f->files, 1);
    w->need_header = true;
    if (rc == 0)
        (void)write_header(f);
}

/* One record into the chunk being built. Under max_bytes, a chunk is
 * written before it could outgrow the room left, so that the file fills
 * up to its limit (a whole chunk refused at the end would be lost). The
 * references of a chunk's records stand for at most TK_TFILE_EXPAND_MAX
 * bytes (FORMAT.md): a chunk is written before a record would take it
 * past, and a record past it alone is left out. */
static void add_record(file_core *f, uint64_t stamp, const void *rec, size_t len)
{
    file_writer *w = &f->w;
    size_t room = TK_EVENT_FILE_ROOM(len); /* what the file form may take */
    size_t more = TK_EVENTS_REC_HEAD + room;
    if (w->nevents > 0 &&
        (w->events.len + w->dict.len + more > w->chunk_target ||
         built(w) + more + dict_worst(len) > data_room(f)))
        write_chunks(f);
    if (w->nevents == 0)
        maybe_rotate(f);
    /* In the file's form (its entries added to this file's dictionary),
     * in place; imm_map sums what its references stand for, as the
     * readers count it (tk_event_file_check). */
    unsigned char *at = tk_events_add(&w->events, stamp, room);
    tk_xlate x = {imm_map, w};
    w->rec_refs = 0;
    size_t n = at != NULL ? tk_event_to_file(rec, len, at, &x) : 0;
    if (n == 0 || w->rec_refs > TK_TFILE_EXPAND_MAX) {
        if (at != NULL) /* leave it out */
            w->events.len = (size_t)(at - TK_EVENTS_REC_HEAD - w->events.p);
        atomic_fetch_add(&f->refused, 1);
        return;
    }
    tk_events_shrink(&w->events, at, room, n);
    if (w->nevents > 0 && w->expand + w->rec_refs > TK_TFILE_EXPAND_MAX) {
        /* The chunk so far goes first, this record begins the next (no
         * rotation in between: its references are numbers of this file). */
        if (tk_bytes_reserve(&w->one, n) != 0) {
            w->events.len = (size_t)(at - TK_EVENTS_REC_HEAD - w->events.p);
            atomic_fetch_add(&f->refused, 1);
            return;
        }
        memcpy(w->one.p, at, n);
        w->events.len = (size_t)(at - TK_EVENTS_REC_HEAD - w->events.p);
        /* (Not written: the entries it refers to may be forgotten.) */
        if (write_chunks(f) != 0 || (at = tk_events_add(&w->events, stamp, n)) == NULL) {
            atomic_fetch_add(&f->refused, 1);
            return;
        }
        memcpy(at, w->one.p, n);
    }
    if (w->nevents == 0 && built(w) > data_room(f)) {
        /* Alone in its chunk, it does not fit: left out, with the entries
         * it added. */
        tk_events_start(&w->events);
        forget_new_entries(w);
        atomic_fetch_add(&f->refused, 1);
        return;
    }
    w->nevents++;
    w->expand += w->rec_refs;
}

/* Takes what the rings hold now into chunks. Returns the records taken. */
static size_t take_records(file_core *f)
{
    file_writer *w = &f->w;
    const void *p;
    size_t len, n = 0;
    uint64_t stamp;
    (void)tk_merge_collect(&w->merge, f->rec->producers, 0);
    while (tk_merge_next(&w->merge, &p, &len, &stamp)) {
        n++;
        /* The limits, on the records in time order: the file stops at
         * the event a printed trace would stop at. */
        switch (tk_limit_event(&w->limit, stamp)) {
        case TK_LIMIT_SHOW:
            add_record(f, stamp, p, len);
            break;
        case TK_LIMIT_LAST:
            add_record(f, stamp, p, len);
            atomic_store(&f->limit_reached, w->limit.reached);
            break;
        case TK_LIMIT_STOP:
            atomic_store(&f->limit_reached, w->limit.reached);
            /* fall through */
        default:
            atomic_fetch_add(&f->over, 1);
        }
    }
    return n;
}

/* The end chunk: the counters when the file ends (the final ones in the
 * last file, which may use the room kept for it). */
static void write_end(file_core *f, bool last)
{
    ErlNifEnv *env = f->w.tmp;
    tk_recorder_stats s;
    tk_recorder_stats_get(f->rec, &s);
    uint64_t overwritten = atomic_load(&f->overwritten);
    ERL_NIF_TERM keys[] = {enif_make_atom(env, "written"),
                           enif_make_atom(env, "dropped"),
                           enif_make_atom(env, "bytes"),
                           enif_make_atom(env, "over"),
                           enif_make_atom(env, "overwritten")};
    ERL_NIF_TERM vals[] = {
        enif_make_uint64(env, atomic_load(&f->on_disk) - overwritten),
        enif_make_uint64(env, s.dropped + atomic_load(&f->refused)),
        enif_make_uint64(env, f->w.tf.total),
        enif_make_uint64(env, atomic_load(&f->over)),
        enif_make_uint64(env, overwritten)};
    ERL_NIF_TERM map;
    ErlNifBinary bin;
    if (enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map) &&
        enif_term_to_binary(env, map, &bin)) {
        (void)put_chunk(f, TK_CHUNK_END, bin.data, bin.size,
                        last ? 0 : END_ROOM + LOST_ROOM);
        enif_release_binary(&bin);
    }
    enif_clear_env(env);
}

static void *writer_main(void *arg)
{
    file_core *f = arg;
    file_writer *w = &f->w;
    uint64_t served = 0;
    /* A write past the file size limit (ulimit -f) raises SIGXFSZ, whose
     * default action ends the VM: held back in this thread for good, the
     * write fails with EFBIG instead, a write error like any other. */
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, NULL);
    for (;;) {
        enif_mutex_lock(f->lock);
        uint64_t asked = f->flush_asked;
        bool stop = f->stop;
        enif_mutex_unlock(f->lock);
        size_t taken = take_records(f);
        if (asked > served || stop) {
            /* Everything recorded before the request: a second collect
             * hands out what the first held back as late. */
            taken += take_records(f);
            write_chunks(f);
            note_lost(f);
            if (asked > served && w->tf.fd >= 0)
                (void)tk_tfile_sync(&w->tf);
            note_error(f);
            enif_mutex_lock(f->lock);
            f->flush_done = asked;
            served = asked;
            enif_cond_broadcast(f->cond);
            enif_mutex_unlock(f->lock);
        } else if (w->nevents > 0 &&
                   now_ns(CLOCK_MONOTONIC) - w->last_write_ns >= WRITE_AFTER_NS) {
            write_chunks(f);
            note_lost(f);
        }
        if (stop)
            break;
        if (taken < 1000) {
            struct timespec ts = {0, IDLE_NS};
            nanosleep(&ts, NULL);
        }
    }
    write_end(f, true);
    tk_tfile_close(&w->tf);
    enif_mutex_lock(f->lock);
    f->thread_exited = true;
    enif_cond_broadcast(f->cond);
    enif_mutex_unlock(f->lock);
    return NULL;
}

/* ---- the callers' side ------------------------------------------------------------ */

/* A wrap set opened at a base where an earlier set left files: its files
 * other than Base.0 (just made new) are removed, so that a reader of the
 * base, which takes every Base.N (tracekit_file_reader, tracekit-cat),
 * finds the new set alone, and an earlier set of more files leaves none
 * behind. (Nothing in a header names its set; a reader could only guess
 * from clocks which files belong together.) Only trace files of this
 * user go (tk_tfile_is_ours): a file of that name that is not one was not
 * written by this user's tracer. Done once, on opening: the files of the
 * new set are created after. */
static void remove_earlier_set(const tk_tfile *tf)
{
    const char *slash = strrchr(tf->base, '/');
    const char *name = slash != NULL ? slash + 1 : tf->base;
    char dir[4096]; /* the base fits: Base.0 was opened */
    size_t dlen = slash == NULL ? 0 : slash == tf->base ? 1 : (size_t)(slash - tf->base);
    if (dlen >= sizeof dir)
        return;
    memcpy(dir, slash == NULL ? "." : tf->base, slash == NULL ? 1 : dlen);
    dir[slash == NULL ? 1 : dlen] = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    size_t nlen = strlen(name);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* The readers' rule: Base.N for any digits N. */
        if (strncmp(e->d_name, name, nlen) != 0 || e->d_name[nlen] != '.')
            continue;
        const char *n = e->d_name + nlen + 1;
        if (*n == 0 || n[strspn(n, "0123456789")] != 0 || strcmp(n, "0") == 0)
            continue;
        /* A file that cannot be removed stays (and is read with the set):
         * the set itself can still be written. */
        if (tk_tfile_is_ours(dirfd(d), e->d_name))
            (void)unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

int file_writer_start(file_lib *lib, file_core *f)
{
    (void)lib;
    file_writer *w = &f->w;
    /* tracekit_file:new/1 takes max_bytes of at least 4096: room for
     * the header and the chunks that end the file. */
    w->max_total = w->tf.max_bytes;
    w->chunk_target = CHUNK_MAX;
    if (w->tf.file_bytes > 0 && w->tf.file_bytes / 8 < w->chunk_target)
        w->chunk_target = w->tf.file_bytes / 8 > CHUNK_MIN ? w->tf.file_bytes / 8 : CHUNK_MIN;
    if ((w->tf.file_bytes > 0 &&
         (w->file_events = tk_mem_zalloc(w->tf.count * sizeof *w->file_events)) == NULL) ||
        tk_merge_init(&w->merge, TK_THREAD_SLOTS) != 0 ||
        tk_limit_init(&w->limit, f->max_events, f->rate_n,
                      (uint64_t)f->rate_ms * (tk_clock_hz() / 1000)) != 0)
        return -1;
    if (w->tf.file_bytes > 0)
        remove_earlier_set(&w->tf);
    new_dictionary(w);
    tk_events_start(&w->events);
    w->last_write_ns = now_ns(CLOCK_MONOTONIC);
    atomic_store(&f->files, 1);
    w->need_header = true;
    if (write_header(f) != 0)
        return -1;
    /* The thread runs this library's code: it holds the library loaded
     * (a resource of its keeper type) until it has been joined. An
     * upgrade from another file takes the file's resource type over,
     * not this one, so that purging the old version no longer unloads
     * code a writer still runs. */
    if ((f->keeper = enif_alloc_resource(lib->keeper_type, 1)) == NULL)
        return -1;
    if (enif_thread_create("tracekit_file_writer", &f->tid, writer_main, f, NULL) != 0) {
        enif_release_resource(f->keeper);
        f->keeper = NULL;
        return -1;
    }
    f->thread_started = true;
    return 0;
}

/* Joins f's writer, and lets its library go (the thread has left its code
 * by now). */
static void join(file_core *f)
{
    enif_thread_join(f->tid, NULL);
    if (f->keeper != NULL)
        enif_release_resource(f->keeper);
    f->keeper = NULL;
}

void file_writer_flush(file_core *f)
{
    enif_mutex_lock(f->lock);
    uint64_t mine = ++f->flush_asked;
    while (f->flush_done < mine && !f->thread_exited)
        enif_cond_wait(f->cond, f->lock);
    enif_mutex_unlock(f->lock);
}

void file_writer_stop(file_core *f)
{
    if (!f->thread_started)
        return;
    enif_mutex_lock(f->lock);
    bool first = !f->stop;
    f->stop = true;
    enif_mutex_unlock(f->lock);
    if (first) {
        join(f);
        enif_mutex_lock(f->lock);
        f->joined = true;
        enif_mutex_unlock(f->lock);
    } else {
        file_writer_flush(f); /* another caller joins; wait for the exit */
    }
}

file_orphans *file_orphans_new(void)
{
    file_orphans *o = enif_alloc(sizeof *o);
    if (o == NULL)
        return NULL;
    o->head = NULL;
    atomic_init(&o->users, 1);
    if ((o->lock = enif_mutex_create("tracekit_file_orphans")) == NULL) {
        enif_free(o);
        return NULL;
    }
    return o;
}

void file_orphans_use(file_orphans *o)
{
    atomic_fetch_add(&o->users, 1);
}

void file_orphans_drop(file_orphans *o)
{
    if (atomic_fetch_sub(&o->users, 1) != 1)
        return;
    /* The last version: a writer left would hold its library, which
     * would then not be unloading. */
    if (o->head != NULL)
        return;
    enif_mutex_destroy(o->lock);
    enif_free(o);
}

void file_writer_orphan(file_orphans *o, file_core *f)
{
    if (!f->thread_started || f->joined) {
        file_core_free(f);
        return;
    }
    /* Nobody can call close/1 or flush/1 any more: the resource is gone. */
    enif_mutex_lock(f->lock);
    f->stop = true;
    enif_mutex_unlock(f->lock);
    enif_mutex_lock(o->lock);
    f->next = o->head;
    o->head = f;
    enif_mutex_unlock(o->lock);
}

void file_writer_reap(file_orphans *o, bool all)
{
    enif_mutex_lock(o->lock);
    for (file_core **at = &o->head; *at != NULL;) {
        file_core *f = *at;
        enif_mutex_lock(f->lock);
        bool exited = f->thread_exited;
        enif_mutex_unlock(f->lock);
        if (!exited && !all) {
            at = &f->next;
            continue;
        }
        *at = f->next;
        join(f);
        file_core_free(f);
    }
    enif_mutex_unlock(o->lock);
}

void file_core_free(file_core *f)
{
    file_writer *w = &f->w;
    tk_merge_destroy(&w->merge);
    tk_limit_free(&w->limit);
    tk_mem_free(w->file_events);
    tk_bytes_free(&w->events);
    tk_bytes_free(&w->dict);
    tk_bytes_free(&w->one);
    tk_mem_free(w->lens);
    tk_u64map_free(&w->words);
    if (w->tf.fd >= 0 || w->tf.base != NULL)
        tk_tfile_close(&w->tf);
    if (w->env != NULL)
        enif_free_env(w->env);
    if (w->tmp != NULL)
        enif_free_env(w->tmp);
    if (f->rec != NULL)
        tk_recorder_free(f->rec);
    tk_mem_free(f->path);
    if (f->cond != NULL)
        enif_cond_destroy(f->cond);
    if (f->lock != NULL)
        enif_mutex_destroy(f->lock);
    tk_mem_free(f);
}
