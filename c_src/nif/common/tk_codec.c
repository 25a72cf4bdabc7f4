/* tk_codec.c: the tag table as atoms, and the check of the VM's term
 * representation that the encoder relies on. */
#include "tk_codec.h"

#include <string.h>

/* See tk_codec.imm_ok. */
static bool imm_check(ErlNifEnv *env)
{
    ErlNifBinary bin;
    ERL_NIF_TERM imm[] = {enif_make_atom(env, "ok"), enif_make_int(env, 0),
                          enif_make_int(env, -5), enif_make_int64(env, 1ll << 40),
                          enif_make_list(env, 0)};
    if (!enif_alloc_binary(4, &bin))
        return false;
    ERL_NIF_TERM other[] = {enif_make_tuple(env, 0),
                            enif_make_tuple1(env, imm[0]),
                            enif_make_list1(env, imm[0]),
                            enif_make_uint64(env, UINT64_MAX), /* a bignum */
                            enif_make_double(env, 1.5),
                            enif_make_binary(env, &bin), enif_make_ref(env),
                            enif_make_new_map(env)};
    for (size_t i = 0; i < sizeof imm / sizeof imm[0]; i++)
        if ((imm[i] & 3) != 3)
            return false;
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if ((other[i] & 3) == 3)
            return false;
    return true;
}

/* See tk_codec.words_ok: atoms, small integers and local pids have ERTS's
 * layouts (tk_term.h). The pid is the loading process's, when the load's
 * environment has one. */
static bool words_check(ErlNifEnv *env)
{
    ErlNifPid self;
    ERL_NIF_TERM ok = enif_make_atom(env, "ok");
    const int64_t ints[] = {0, 5, -5, INT64_C(1) << 40, -(INT64_C(1) << 40)};
    if (!tk_is_atom_word(ok) || tk_atom_word(ok >> 6) != ok)
        return false;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((uint64_t)enif_make_int64(env, ints[i]) != tk_small_word(ints[i]))
            return false;
    if (enif_self(env, &self) == NULL)
        return false;
    ERL_NIF_TERM pid = enif_make_pid(env, &self);
    return tk_is_pid_word(pid) && enif_is_pid(env, pid) &&
           !tk_is_atom_word(pid) && !tk_is_small_word(pid);
}

int tk_codec_init(tk_codec *c, ErlNifEnv *env)
{
    memset(c, 0, sizeof *c);
    tk_keymap_init(&c->atoms);
    for (unsigned i = 0; i < TK_TAG_COUNT; i++) {
        c->tag[i] = enif_make_atom(env, tk_tags[i].name);
        int slot = tk_keymap_index(&c->atoms, (uint64_t)c->tag[i]);
        if (slot < 0)
            return -1;
        c->slot_tag[slot] = (unsigned char)i;
    }
    c->am_trace = enif_make_atom(env, "trace");
    c->am_trace_ts = enif_make_atom(env, "trace_ts");
    c->am_seq_trace = enif_make_atom(env, "seq_trace");
    c->am_ellipsis = enif_make_atom(env, "...");
    c->am_fun = enif_make_atom(env, "fun");
    c->am_timestamp = enif_make_atom(env, "timestamp");
    c->am_cpu_timestamp = enif_make_atom(env, "cpu_timestamp");
    c->am_monotonic = enif_make_atom(env, "monotonic");
    c->am_strict_monotonic = enif_make_atom(env, "strict_monotonic");
    c->imm_ok = imm_check(env);
    c->words_ok = c->imm_ok && words_check(env);
    return 0;
}

int tk_codec_tagset(const tk_codec *c, ErlNifEnv *env, ERL_NIF_TERM t,
                    tk_tagset *out)
{
    if (enif_is_identical(t, enif_make_atom(env, "true"))) {
        *out = TK_TAGSET_ALL;
        return 0;
    }
    ERL_NIF_TERM head;
    tk_tagset set = 0;
    while (enif_get_list_cell(env, t, &head, &t)) {
        int i = tk_codec_tag(c, head);
        if (i < 0)
            return -1;
        set |= (tk_tagset)1 << i;
    }
    if (!enif_is_empty_list(env, t))
        return -1; /* improper */
    *out = set;
    return 0;
}

ERL_NIF_TERM tk_codec_tag_list(const tk_codec *c, ErlNifEnv *env,
                               tk_tagset set)
{
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (unsigned i = TK_TAG_COUNT; i-- > 0;)
        if ((set >> i) & 1)
            list = enif_make_list_cell(env, c->tag[i], list);
    return list;
}

/* ---- payload modes ------------------------------------------------------- */

/* Bytes of magnitude beyond which a budget mode cuts an integer unseen. */
#define BIG_LIMIT_MAX 65536

/* +-2^(8 * bytes) as a term in env, made from the external format:
 * 131, LARGE_BIG_EXT (111), u32 digit count (big-endian), sign, digits
 * (least significant first). */
static int make_power(ErlNifEnv *env, size_t bytes, int negative,
                      ERL_NIF_TERM *out)
{
    size_t n = bytes + 1, len = 7 + n;
    unsigned char *ext = enif_alloc(len);
    if (ext == NULL)
        return -1;
    ext[0] = 131;
    ext[1] = 111;
    ext[2] = (unsigned char)(n >> 24);
    ext[3] = (unsigned char)(n >> 16);
    ext[4] = (unsigned char)(n >> 8);
    ext[5] = (unsigned char)n;
    ext[6] = (unsigned char)(negative != 0);
    memset(ext + 7, 0, bytes);
    ext[len - 1] = 1;
    int ok = enif_binary_to_term(env, ext, len, out, 0) == len;
    enif_free(ext);
    return ok ? 0 : -1;
}

int tk_payload_init(tk_payload *p, tk_payload_mode mode, size_t max_bytes)
{
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->max_bytes = max_bytes > 0 ? max_bytes : 1;
    if (mode != TK_PAYLOAD_MAX)
        return 0;
    size_t bytes = p->max_bytes < BIG_LIMIT_MAX ? p->max_bytes : BIG_LIMIT_MAX;
    p->big_env = enif_alloc_env();
    if (p->big_env == NULL || make_power(p->big_env, bytes, 0, &p->big_pos) != 0 ||
        make_power(p->big_env, bytes, 1, &p->big_neg) != 0) {
        tk_payload_destroy(p);
        return -1;
    }
    return 0;
}

void tk_payload_destroy(tk_payload *p)
{
    if (p->big_env != NULL)
        enif_free_env(p->big_env);
    p->big_env = NULL;
}
