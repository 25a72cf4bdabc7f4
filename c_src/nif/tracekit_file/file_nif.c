/* file_nif.c: the tracekit_file NIF library: load and upgrade, the file
 * resource, the functions people call (new, stats, flush, close) and the
 * VM's callbacks (the recorders' hot path). The writer thread is in
 * writer.c. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "tk_clock.h"
#include "tk_mem.h"
#include "tk_posix.h"

static void file_dtor(ErlNifEnv *env, void *obj)
{
    file_lib *lib = enif_priv_data(env); /* the type's owner: the newest */
    file_res *r = obj;
    /* No callback can be running: the VM holds the state term for as long
     * as any tracee may call us. An unclosed file is ended by its writer,
     * on its own: this runs on a scheduler, which must not wait for the
     * disk. */
    if (r->core == NULL)
        return;
    if (r->core->rec != NULL)
        tk_recorder_close(r->core->rec);
    file_writer_orphan(lib->orphans, r->core);
}

/* A writer thread's hold on its library: nothing to free. */
static void keeper_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    (void)obj;
}

/* ---- load and upgrade --------------------------------------------------------------- */

/* A library is unloaded only once no writer it started holds it (its
 * keeper resources): none runs its code any more. Writers of other
 * versions that have ended are joined on the way. */
static void unload_lib(file_lib *lib)
{
    file_writer_reap(lib->orphans, false);
    file_orphans_drop(lib->orphans);
    tk_recorder_lib_free(&lib->rec);
}
#define TK_NIF_UNLOAD_MORE(priv) unload_lib(priv)

/* The name of this mapping's keeper type: the address of its code. A
 * library loaded again from the same file shares the mapping (the
 * loader counts its users), takes the type over and runs the same code;
 * one loaded from another file has a type of its own. */
static void keeper_name(char *out, size_t cap)
{
    snprintf(out, cap, "tracekit_file_keeper_%p", (void *)&keeper_dtor);
}

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    file_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    memset(lib, 0, sizeof *lib);
#define FILE_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);
    FILE_ATOMS(FILE_ATOM_INIT)
#undef FILE_ATOM_INIT
    char keeper[64];
    keeper_name(keeper, sizeof keeper);
    lib->file_type = enif_open_resource_type(env, NULL, "tracekit_file",
                                             file_dtor, flags, NULL);
    lib->keeper_type = enif_open_resource_type(env, NULL, keeper, keeper_dtor, flags, NULL);
    lib->orphans = old_priv != NULL ? ((file_lib *)old_priv)->orphans : file_orphans_new();
    if (lib->file_type == NULL || lib->keeper_type == NULL || lib->orphans == NULL ||
        file_reader_init(lib, env, flags) != 0 ||
        tk_recorder_lib_init(&lib->rec, env, lib->file_type) != 0) {
        if (old_priv == NULL && lib->orphans != NULL)
            file_orphans_drop(lib->orphans);
        enif_free(lib);
        return -1;
    }
    if (old_priv != NULL)
        file_orphans_use(lib->orphans);
    *priv = lib;
    return 0;
}

#include "tk_niflib.h"
TK_NIF_LIFE(open_lib)

static file_core *get_file(const file_lib *lib, ErlNifEnv *env, ERL_NIF_TERM t)
{
    file_res *r;
    return enif_get_resource(env, t, lib->file_type, (void **)&r) ? r->core : NULL;
}

/* ---- new_nif(Path, Options) ---------------------------------------------------
 * Options: a map of exactly these keys, checked by tracekit_file:new/1 and
 * again here (anyone may call this function; a bad one is badarg):
 *   wrap => {BytesPerFile, Count}    {0, 0}: one file
 *   max_bytes => N                   0: no limit
 *   buffer => Bytes, payload => full | none | max_bytes,
 *   payload_max => N, tags => true | [Tag]   the recorder's (tk_recorder_args)
 *   meta => {Node, OtpRelease, Version}      for the header
 *   max_events => N, rate => {N, Ms}        0: none
 *   mode => Bits                     the files' permission bits
 * A path that cannot be made gives {error, Posix} before anything is
 * traced. */

typedef struct {
    ErlNifBinary path;
    uint64_t wrap_bytes, wrap_count; /* wrap_count 0: one file */
    uint64_t max_total;              /* 0: no limit */
    tk_recorder_args rec;
    ERL_NIF_TERM wrap, meta[3];      /* terms of the caller's env */
    uint64_t max_events;             /* 0: none */
    unsigned rate_n, rate_ms;        /* rate_n 0: none */
    unsigned mode;
} file_opts;

/* The value of `key` in the options map. */
static bool opt(ErlNifEnv *env, ERL_NIF_TERM map, ERL_NIF_TERM key, ERL_NIF_TERM *v)
{
    return enif_get_map_value(env, map, key, v);
}

/* A tuple of n elements. */
static bool tuple_n(ErlNifEnv *env, ERL_NIF_TERM t, int n, const ERL_NIF_TERM **es)
{
    int arity;
    return enif_get_tuple(env, t, &arity, es) && arity == n;
}

static bool get_path(ErlNifEnv *env, ERL_NIF_TERM t, file_opts *o)
{
    return enif_inspect_binary(env, t, &o->path) && o->path.size > 0 &&
           o->path.size <= 4000 && memchr(o->path.data, 0, o->path.size) == NULL;
}

/* wrap and max_bytes: the files and their sizes. */
static bool get_files(const file_lib *lib, ErlNifEnv *env, ERL_NIF_TERM map,
                      file_opts *o)
{
    const ERL_NIF_TERM *w;
    ERL_NIF_TERM max;
    return opt(env, map, lib->am_wrap, &o->wrap) && tuple_n(env, o->wrap, 2, &w) &&
           enif_get_uint64(env, w[0], &o->wrap_bytes) &&
           enif_get_uint64(env, w[1], &o->wrap_count) && o->wrap_count <= 1000000 &&
           (o->wrap_count == 0 || o->wrap_bytes >= 4096) &&
           opt(env, map, lib->rec.am_max_bytes, &max) &&
           enif_get_uint64(env, max, &o->max_total) &&
           (o->max_total == 0 || o->max_total >= TK_FILE_MAX_BYTES_MIN);
}

/* buffer, payload, payload_max and tags: the recorder's. */
static bool get_recorder(const file_lib *lib, ErlNifEnv *env, ERL_NIF_TERM map,
                         file_opts *o)
{
    ERL_NIF_TERM a[5] = {0, lib->rec.am_drop, 0, 0, 0};
    return opt(env, map, lib->am_buffer, &a[0]) && opt(env, map, lib->am_payload, &a[2]) &&
           opt(env, map, lib->am_payload_max, &a[3]) &&
           opt(env, map, lib->am_tags, &a[4]) &&
           tk_recorder_args_get(&lib->rec, env, a, &o->rec) == 0;
}

/* max_events and rate: the limits the writer applies. */
static bool get_limits(const file_lib *lib, ErlNifEnv *env, ERL_NIF_TERM map,
                       file_opts *o)
{
    ERL_NIF_TERM max, rate;
    const ERL_NIF_TERM *r;
    return opt(env, map, lib->am_max_events, &max) &&
           enif_get_uint64(env, max, &o->max_events) &&
           opt(env, map, lib->am_rate, &rate) && tuple_n(env, rate, 2, &r) &&
           enif_get_uint(env, r[0], &o->rate_n) && o->rate_n <= TK_LIMIT_RATE_MAX &&
           enif_get_uint(env, r[1], &o->rate_ms) && o->rate_ms <= TK_FILE_RATE_MS_MAX &&
           (o->rate_n == 0 || o->rate_ms > 0);
}

/* meta ({Node, OtpRelease, Version}, for the header) and mode. */
static bool get_file_meta(const file_lib *lib, ErlNifEnv *env, ERL_NIF_TERM map,
                          file_opts *o)
{
    ERL_NIF_TERM meta, mode;
    const ERL_NIF_TERM *m;
    if (!opt(env, map, lib->am_meta, &meta) || !tuple_n(env, meta, 3, &m) ||
        !enif_is_atom(env, m[0]) || !opt(env, map, lib->am_mode, &mode) ||
        !enif_get_uint(env, mode, &o->mode) || !tk_tfile_mode_ok(o->mode))
        return false;
    memcpy(o->meta, m, sizeof o->meta);
    return true;
}

static bool get_opts(const file_lib *lib, ErlNifEnv *env, const ERL_NIF_TERM argv[2],
                     file_opts *o)
{
    size_t n;
    memset(o, 0, sizeof *o);
    return get_path(env, argv[0], o) && enif_get_map_size(env, argv[1], &n) && n == 10 &&
           get_files(lib, env, argv[1], o) && get_recorder(lib, env, argv[1], o) &&
           get_limits(lib, env, argv[1], o) && get_file_meta(lib, env, argv[1], o);
}

/* A file's state made from the options, its file not opened yet; NULL
 * when out of memory (what was made is freed). */
static file_core *core_new(const file_lib *lib, const file_opts *o)
{
    file_core *f = tk_mem_alloc(sizeof *f);
    if (f == NULL)
        return NULL;
    memset(f, 0, sizeof *f);
    f->w.tf.fd = -1;
    f->lock = enif_mutex_create("tracekit_file");
    f->cond = enif_cond_create("tracekit_file");
    f->path = tk_mem_alloc(o->path.size + 1);
    f->w.env = enif_alloc_env();
    f->w.tmp = enif_alloc_env();
    const tk_recorder_args *a = &o->rec;
    f->rec = tk_recorder_new(a->size, a->policy, a->mode, a->max_bytes, a->tags,
                             a->all_tags);
    if (f->lock == NULL || f->cond == NULL || f->path == NULL || f->w.env == NULL ||
        f->w.tmp == NULL || f->rec == NULL) {
        file_core_free(f);
        return NULL;
    }
    memcpy(f->path, o->path.data, o->path.size);
    f->path[o->path.size] = 0;
    f->max_events = o->max_events;
    f->rate_n = o->rate_n;
    f->rate_ms = o->rate_ms;
    file_writer *w = &f->w;
    w->node = enif_make_copy(w->env, o->meta[0]);
    w->otp_release = enif_make_copy(w->env, o->meta[1]);
    w->version = enif_make_copy(w->env, o->meta[2]);
    w->wrap = o->wrap_count > 0 ? enif_make_copy(w->env, o->wrap) : lib->am_none;
    w->tags = tk_codec_tag_list(&lib->rec.codec, w->env, TK_TAGSET_ALL);
    return f;
}

/* {error, Posix} */
static ERL_NIF_TERM posix_error(const file_lib *lib, ErlNifEnv *env, int e)
{
    char name[32];
    return enif_make_tuple2(env, lib->am_error,
                            enif_make_atom(env, tk_posix_name(e, name, sizeof name)));
}

/* Opens the first file and starts the writer: 0, or an errno value. The
 * magic and the header are written here, on this scheduler thread: with
 * SIGXFSZ held back (a file size limit already reached gives EFBIG). */
static int core_start(file_lib *lib, file_core *f, const file_opts *o)
{
    tk_tfile *tf = &f->w.tf;
    sigset_t saved;
    int e = 0;
    tk_posix_xfsz_hold(&saved);
    if (tk_tfile_open(tf, f->path, o->wrap_count > 0 ? o->wrap_bytes : 0,
                      (unsigned)o->wrap_count, o->max_total, o->mode) != 0)
        e = errno;
    else if (file_writer_start(lib, f) != 0)
        e = tf->last_errno ? tf->last_errno : ENOMEM;
    tk_posix_xfsz_release(&saved);
    return e;
}

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    file_opts o;
    if (!get_opts(lib, env, argv, &o))
        return enif_make_badarg(env);
    /* Writers of freed resources that have finished are joined here. */
    file_writer_reap(lib->orphans, false);
    file_res *r = enif_alloc_resource(lib->file_type, sizeof *r);
    if (r == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    memset(r, 0, sizeof *r);
    ERL_NIF_TERM ret;
    if ((r->core = core_new(lib, &o)) == NULL) {
        ret = enif_raise_exception(env, lib->am_enomem);
    } else {
        r->rec = r->core->rec;
        int e = core_start(lib, r->core, &o);
        ret = e != 0 ? posix_error(lib, env, e)
                     : enif_make_tuple2(env, lib->rec.am_ok, enif_make_resource(env, r));
    }
    enif_release_resource(r);
    return ret;
}

/* flush(File): returns once everything recorded before the call is in the
 * file (and synced to the device). */
static ERL_NIF_TERM flush_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    file_core *f = get_file(lib, env, argv[0]);
    if (f == NULL)
        return enif_make_badarg(env);
    file_writer_flush(f);
    return lib->rec.am_ok;
}

/* close(File): no more events, everything recorded is written, the file
 * ends and is closed; the callbacks remove themselves from the tracees.
 * When it returns, nothing more is recorded or counted: the stats are
 * final. */
static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    file_core *f = get_file(lib, env, argv[0]);
    if (f == NULL)
        return enif_make_badarg(env);
    tk_recorder_close_sync(f->rec);
    file_writer_stop(f);
    file_writer_reap(lib->orphans, false);
    return lib->rec.am_ok;
}

/* none, or the limit the writer reached: {max_events, N} | {rate, {N, Ms}} */
static ERL_NIF_TERM limit_term(file_lib *lib, ErlNifEnv *env, file_core *f)
{
    switch (atomic_load(&f->limit_reached)) {
    case TK_LIMIT_MAX:
        return enif_make_tuple2(env, lib->am_max_events,
                                enif_make_uint64(env, f->max_events));
    case TK_LIMIT_RATE:
        return enif_make_tuple2(env, lib->am_rate,
                                enif_make_tuple2(env, enif_make_uint(env, f->rate_n),
                                                 enif_make_uint(env, f->rate_ms)));
    default:
        return lib->am_none;
    }
}

static ERL_NIF_TERM stats_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    file_core *f = get_file(lib, env, argv[0]);
    if (f == NULL)
        return enif_make_badarg(env);
    tk_recorder_stats s;
    tk_recorder_stats_get(f->rec, &s);
    tk_recorder_cfg cfg;
    tk_recorder_cfg_get(f->rec, &cfg);
    /* Overwritten before written: the events it counts are in on_disk
     * already (never more than on_disk read after it). */
    uint64_t overwritten = atomic_load(&f->overwritten);
    uint64_t on_disk = atomic_load(&f->on_disk), refused = atomic_load(&f->refused);
    uint64_t over = atomic_load(&f->over);
    /* Recorded and not yet written, refused or over: in the rings, in hand. */
    uint64_t gone = on_disk + refused + over;
    uint64_t buffered = s.written > gone ? s.written - gone : 0;
    int e = atomic_load(&f->last_errno);
    char name[32];
    ERL_NIF_TERM tags = cfg.all_tags ? lib->am_all
                                     : tk_codec_tag_list(&lib->rec.codec, env, cfg.tags);
    ERL_NIF_TERM path;
    size_t plen = strlen(f->path);
    memcpy(enif_make_new_binary(env, plen, &path), f->path, plen);
    ERL_NIF_TERM keys[] = {lib->am_written, lib->am_dropped, lib->am_bytes,
                           lib->am_files, lib->am_write_errors, lib->am_last_error,
                           lib->am_buffered, lib->am_filtered, lib->am_truncated,
                           lib->am_producers, lib->am_size, lib->am_closed,
                           lib->am_paused, lib->am_sample, lib->am_tags,
                           lib->am_path, lib->am_over, lib->am_limit,
                           lib->am_overwritten};
    ERL_NIF_TERM vals[] = {
        enif_make_uint64(env, on_disk - overwritten),
        enif_make_uint64(env, s.dropped + refused),
        enif_make_uint64(env, atomic_load(&f->bytes)),
        enif_make_uint64(env, atomic_load(&f->files)),
        enif_make_uint64(env, atomic_load(&f->write_errors)),
        e == 0 ? lib->am_none : enif_make_atom(env, tk_posix_name(e, name, sizeof name)),
        enif_make_uint64(env, buffered), enif_make_uint64(env, s.filtered),
        enif_make_uint64(env, s.truncated), enif_make_uint(env, s.producers),
        enif_make_uint64(env, f->rec->size),
        atomic_load(&f->rec->closed) ? lib->rec.am_true : lib->rec.am_false,
        cfg.paused ? lib->rec.am_true : lib->rec.am_false,
        enif_make_uint(env, cfg.sample), tags, path, enif_make_uint64(env, over),
        limit_term(lib, env, f), enif_make_uint64(env, overwritten)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

/* set_nif(File, Paused, Tags, Sample): as tracekit_ring:set/2. */
static ERL_NIF_TERM set_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    file_core *f = get_file(lib, env, argv[0]);
    if (f == NULL || tk_recorder_set(&lib->rec, env, f->rec, argv + 1) != 0)
        return enif_make_badarg(env);
    return lib->rec.am_ok;
}

/* private_dir_nif(Parent, Prefix): a directory of this user's own,
 * Parent/Prefix and 12 random characters, mode 0700 (tk_tfile_private_dir):
 * {ok, Path} or {error, Posix}. */
static ERL_NIF_TERM private_dir_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
    ErlNifBinary parent, prefix;
    char p[4096], q[256], out[4400];
    if (!enif_inspect_binary(env, argv[0], &parent) || parent.size == 0 ||
        parent.size >= sizeof p || memchr(parent.data, 0, parent.size) != NULL ||
        !enif_inspect_binary(env, argv[1], &prefix) || prefix.size >= sizeof q ||
        memchr(prefix.data, 0, prefix.size) != NULL)
        return enif_make_badarg(env);
    memcpy(p, parent.data, parent.size);
    p[parent.size] = 0;
    memcpy(q, prefix.data, prefix.size);
    q[prefix.size] = 0;
    if (tk_tfile_private_dir(p, q, out, sizeof out) != 0)
        return posix_error(lib, env, errno);
    ERL_NIF_TERM path;
    size_t n = strlen(out);
    memcpy(enif_make_new_binary(env, n, &path), out, n);
    return enif_make_tuple2(env, lib->rec.am_ok, path);
}

/* ---- the functions -------------------------------------------------------------- */

/* The callbacks are the recorder's (a holder starts with its recorder). */
_Static_assert(offsetof(file_res, rec) == 0, "a holder starts with its recorder");

static ErlNifFunc funcs[] = {
    /* Dirty: touching the memory of big rings, opening files, waiting for
     * the writer. */
    {"new_nif", 2, new_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"flush", 1, flush_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"close", 1, close_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"stats", 1, stats_nif, 0},
    {"set_nif", 4, set_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"private_dir_nif", 2, private_dir_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    FILE_READER_FUNCS,
    TK_RECORDER_CALLBACKS
};

ERL_NIF_INIT(tracekit_file, funcs, load, NULL, upgrade, unload)
