/* file_nif.c: the tracekit_file NIF library: load and upgrade, the file
 * resource, the functions people call (new, stats, flush, close) and the
 * VM's callbacks (the recorders' hot path). The writer thread is in
 * writer.c. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "tk_clock.h"
#include "tk_mem.h"
#include "tk_posix.h"

static void file_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    file_res *r = obj;
    /* No callback can be running: the VM holds the state term for as long
     * as any tracee may call us. An unclosed file is ended by its writer,
     * on its own: this runs on a scheduler, which must not wait for the
     * disk. */
    if (r->core == NULL)
        return;
    if (r->core->rec != NULL)
        tk_recorder_close(r->core->rec);
    file_writer_orphan(r->core);
}

/* ---- load and upgrade --------------------------------------------------------------- */

/* No writer may outlive the code it runs. */
#define TK_NIF_UNLOAD_MORE(priv)                                           \
    (file_writer_reap(true), tk_recorder_lib_free(&((file_lib *)(priv))->rec))

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    (void)old_priv;
    file_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    memset(lib, 0, sizeof *lib);
#define FILE_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);
    FILE_ATOMS(FILE_ATOM_INIT)
#undef FILE_ATOM_INIT
    lib->file_type = enif_open_resource_type(env, NULL, "tracekit_file",
                                             file_dtor, flags, NULL);
    if (lib->file_type == NULL || file_reader_init(lib, env, flags) != 0 ||
        tk_recorder_lib_init(&lib->rec, env, lib->file_type) != 0) {
        enif_free(lib);
        return -1;
    }
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

/* ---- new(Path, {WrapBytes, WrapCount}, MaxTotal, Size, Payload, MaxBytes,
 *          Tags, {Node, OtpRelease, Version}, {MaxEvents, RateN, RateMs}) ------
 * (MaxEvents 0: no maximum; RateN 0: no rate.)
 * tracekit_file:new/1 checks the options; here they are checked again
 * (badarg). A path that cannot be created gives {error, Posix} before
 * anything is traced. */

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    ErlNifBinary path;
    const ERL_NIF_TERM *wrap, *meta, *lim;
    int nw, nm, nl;
    ErlNifUInt64 wbytes, wcount, max_total, max_events;
    unsigned rate_n, rate_ms;
    ERL_NIF_TERM rargv[5] = {argv[3], lib->rec.am_drop, argv[4], argv[5], argv[6]};
    tk_recorder_args a;
    if (!enif_inspect_binary(env, argv[0], &path) || path.size == 0 ||
        path.size > 4000 || memchr(path.data, 0, path.size) != NULL ||
        !enif_get_tuple(env, argv[1], &nw, &wrap) || nw != 2 ||
        !enif_get_uint64(env, wrap[0], &wbytes) || !enif_get_uint64(env, wrap[1], &wcount) ||
        wcount > 1000000 || (wcount > 0 && wbytes < 4096) ||
        !enif_get_uint64(env, argv[2], &max_total) ||
        (max_total != 0 && max_total < TK_FILE_MAX_BYTES_MIN) ||
        tk_recorder_args_get(&lib->rec, env, rargv, &a) != 0 ||
        !enif_get_tuple(env, argv[7], &nm, &meta) || nm != 3 ||
        !enif_is_atom(env, meta[0]) ||
        !enif_get_tuple(env, argv[8], &nl, &lim) || nl != 3 ||
        !enif_get_uint64(env, lim[0], &max_events) ||
        !enif_get_uint(env, lim[1], &rate_n) || rate_n > TK_LIMIT_RATE_MAX ||
        !enif_get_uint(env, lim[2], &rate_ms) || rate_ms > TK_FILE_RATE_MS_MAX ||
        (rate_n > 0 && rate_ms == 0))
        return enif_make_badarg(env);

    /* Writers of freed resources that have finished are joined here. */
    file_writer_reap(false);
    file_res *r = enif_alloc_resource(lib->file_type, sizeof *r);
    if (r == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    memset(r, 0, sizeof *r);
    file_core *f = tk_mem_alloc(sizeof *f);
    if (f == NULL) {
        enif_release_resource(r);
        return enif_raise_exception(env, lib->am_enomem);
    }
    memset(f, 0, sizeof *f);
    r->core = f;
    f->w.tf.fd = -1;
    f->lock = enif_mutex_create("tracekit_file");
    f->cond = enif_cond_create("tracekit_file");
    f->path = tk_mem_alloc(path.size + 1);
    f->w.env = enif_alloc_env();
    f->w.tmp = enif_alloc_env();
    f->rec = r->rec = tk_recorder_new(a.size, a.policy, a.mode, a.max_bytes,
                                      a.tags, a.all_tags);
    ERL_NIF_TERM ret;
    if (f->lock == NULL || f->cond == NULL || f->path == NULL ||
        f->w.env == NULL || f->w.tmp == NULL || f->rec == NULL) {
        ret = enif_raise_exception(env, lib->am_enomem);
        goto out;
    }
    f->max_events = max_events;
    f->rate_n = rate_n;
    f->rate_ms = rate_ms;
    memcpy(f->path, path.data, path.size);
    f->path[path.size] = 0;
    file_writer *w = &f->w;
    w->node = enif_make_copy(w->env, meta[0]);
    w->otp_release = enif_make_copy(w->env, meta[1]);
    w->version = enif_make_copy(w->env, meta[2]);
    w->wrap = wcount > 0 ? enif_make_copy(w->env, argv[1]) : lib->am_none;
    w->tags = tk_codec_tag_list(&lib->rec.codec, w->env, TK_TAGSET_ALL);
    if (tk_tfile_open(&w->tf, f->path, wcount > 0 ? wbytes : 0,
                      (unsigned)wcount, max_total) != 0) {
        char name[32];
        ret = enif_make_tuple2(env, lib->am_error,
                               enif_make_atom(env, tk_posix_name(errno, name, sizeof name)));
        goto out;
    }
    if (file_writer_start(lib, f) != 0) {
        char name[32];
        int e = w->tf.last_errno ? w->tf.last_errno : ENOMEM;
        ret = enif_make_tuple2(env, lib->am_error,
                               enif_make_atom(env, tk_posix_name(e, name, sizeof name)));
        goto out;
    }
    ret = enif_make_tuple2(env, lib->rec.am_ok, enif_make_resource(env, r));
out:
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
 * ends and is closed; the callbacks remove themselves from the tracees. */
static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    file_lib *lib = enif_priv_data(env);
    file_core *f = get_file(lib, env, argv[0]);
    if (f == NULL)
        return enif_make_badarg(env);
    tk_recorder_close(f->rec);
    file_writer_stop(f);
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
                           lib->am_path, lib->am_over, lib->am_limit};
    ERL_NIF_TERM vals[] = {
        enif_make_uint64(env, on_disk), enif_make_uint64(env, s.dropped + refused),
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
        limit_term(lib, env, f)};
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

/* ---- the functions -------------------------------------------------------------- */

/* The callbacks are the recorder's (a holder starts with its recorder). */
_Static_assert(offsetof(file_res, rec) == 0, "a holder starts with its recorder");

static ErlNifFunc funcs[] = {
    /* Dirty: touching the memory of big rings, opening files, waiting for
     * the writer. */
    {"new_nif", 9, new_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"flush", 1, flush_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"close", 1, close_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"stats", 1, stats_nif, 0},
    {"set_nif", 4, set_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    FILE_READER_FUNCS,
    TK_RECORDER_CALLBACKS
};

ERL_NIF_INIT(tracekit_file, funcs, load, NULL, upgrade, unload)
