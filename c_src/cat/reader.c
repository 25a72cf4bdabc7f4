/* reader.c: the files of a source, their headers, and their chunks into
 * decoded events, as tracekit_file_reader reads them (the same files in
 * the same order, the same chunks refused at the same place), one chunk
 * in hand per file.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ei.h>

#include "cat.h"
#include "tk_ext.h"

static void fail(cat_failure *f, const char *file, uint64_t off, int status,
                 const char *why)
{
    f->file = file;
    f->offset = off;
    f->status = status;
    snprintf(f->why, sizeof f->why, "%s", why);
}

/* ---- the files of a source ------------------------------------------------ */

static int by_name(const void *a, const void *b)
{
    /* lists:sort/1 of the names: byte order */
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Base.N for every N there is. */
static bool wrap_member(const char *name, size_t nlen, const char *entry)
{
    if (strncmp(entry, name, nlen) != 0 || entry[nlen] != '.' || entry[nlen + 1] == 0)
        return false;
    for (const char *c = entry + nlen + 1; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    return true;
}

bool source_files(const char *src, char ***files, size_t *n, size_t *cap,
                  cat_failure *f)
{
    struct stat st;
    if (stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
        GROW(*files, *cap, *n + 1);
        (*files)[(*n)++] = xstrndup(src, strlen(src));
        return true;
    }
    const char *slash = strrchr(src, '/');
    char *dir = slash ? xstrndup(src, (size_t)(slash - src)) : xstrndup(".", 1);
    const char *name = slash ? slash + 1 : src;
    size_t nlen = strlen(name), first = *n;
    DIR *d = opendir(slash == src ? "/" : dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!wrap_member(name, nlen, e->d_name))
                continue;
            sbuf path = {0};
            if (slash) {
                sb_put(&path, src, (size_t)(slash - src));
                sb_ch(&path, '/');
            }
            sb_str(&path, e->d_name);
            GROW(*files, *cap, *n + 1);
            (*files)[(*n)++] = path.p;
        }
        closedir(d);
    }
    free(dir);
    if (*n == first) {
        errno = ENOENT;
        fail(f, src, 0, CAT_NOFILE, "no such file or wrap set");
        return false;
    }
    qsort(*files + first, *n - first, sizeof **files, by_name);
    return true;
}

/* ---- headers -------------------------------------------------------------- */

/* A non-negative integer below 2^64 (the stamps may need 64 bits). */
static bool node_u64(const tnode *n, uint64_t *v)
{
    if (n->type == T_INT) {
        if (n->u.i < 0)
            return false;
        *v = (uint64_t)n->u.i;
        return true;
    }
    if (n->type != T_BIG || n->neg || n->n > 8)
        return false;
    uint64_t m = 0;
    for (size_t k = n->n; k > 0; k--)
        m = m << 8 | n->u.p[k - 1];
    *v = m;
    return true;
}

static const tnode *map_get(const tree *t, const tnode *map, const char *key)
{
    for (uint32_t k = 0; k < map->n; k++)
        if (is_atom(kid(t, map, 2 * k), key))
            return kid(t, map, 2 * k + 1);
    return NULL;
}

typedef struct {
    char *key;
    size_t len;
    tk_anchor ref;
    uint64_t hz;
} machine;

/* The first chunk: the header, whose anchor places the file's stamps. */
static bool header(reader *r, machine **ms, size_t *nm, size_t *mcap,
                   cat_failure *f)
{
    unsigned type;
    const unsigned char *p;
    size_t len;
    uint64_t at = r->r.off;
    int rc = tk_tread_next(&r->r, &type, &p, &len);
    if (rc != TK_TREAD_CHUNK || type != TK_CHUNK_HEADER) {
        fail(f, r->path, rc == TK_TREAD_EOF ? TK_TFILE_MAGIC_LEN : at, CAT_DAMAGED,
             rc == TK_TREAD_CHUNK ? "the first chunk is not a header"
                                  : "no header");
        return false;
    }
    tree t = {0};
    size_t pos = 1;
    long root = len > 1 && p[0] == 131 ? etf_parse(&t, p, len, &pos) : -1;
    const tnode *hd = root >= 0 ? &t.v[root] : NULL, *anchor, *v;
    uint64_t s, sys, hz = 1000000000;
    if (hd == NULL || pos != len || hd->type != T_MAP ||
        (anchor = map_get(&t, hd, "anchor")) == NULL || anchor->type != T_TUPLE ||
        anchor->n != 2 || !node_u64(kid(&t, anchor, 0), &s) ||
        !node_u64(kid(&t, anchor, 1), &sys) ||
        ((v = map_get(&t, hd, "stamp_hz")) != NULL && !node_u64(v, &hz))) {
        free(t.v);
        fail(f, r->path, at, CAT_DAMAGED, "a header that makes no sense");
        return false;
    }
    if ((v = map_get(&t, hd, "node")) != NULL && v->type == T_ATOM) {
        sbuf b = {0};
        atom_text(&b, v);
        r->node = b.p ? b.p : xstrndup("", 0);
    }
    /* The machine: its boot id and clock (or the file alone). */
    sbuf key = {0};
    const tnode *m = map_get(&t, hd, "machine"), *st = map_get(&t, hd, "stamp");
    if (m != NULL)
        sb_put(&key, m->etf, m->etf_len);
    else
        sb_fmt(&key, "file:%s", r->path);
    sb_ch(&key, 0);
    if (st != NULL)
        sb_put(&key, st->etf, st->etf_len);
    free(t.v);
    for (size_t k = 0; k < *nm; k++)
        if ((*ms)[k].len == key.len && memcmp((*ms)[k].key, key.p, key.len) == 0) {
            r->ref = (*ms)[k].ref;
            r->hz = (*ms)[k].hz;
            free(key.p);
            return true;
        }
    GROW(*ms, *mcap, *nm + 1);
    (*ms)[(*nm)++] = (machine){key.p, key.len, {s, sys}, hz};
    r->ref = (tk_anchor){s, sys};
    r->hz = hz;
    return true;
}

/* --damaged skip: a region read over. */
static void note_skip(reader *r, uint64_t from, uint64_t to, bool to_end)
{
    cat_skips *s = r->skips;
    GROW(s->v, s->cap, s->n + 1);
    s->v[s->n++] = (cat_skip){r->path, from, to, to_end};
}

/* After damage at `at` (nothing consumed there, or a chunk read that
 * makes no sense): on at the next good chunk, or done with the file. */
static void skip_to_next(reader *r, uint64_t at)
{
    if (tk_tread_resync(&r->r)) {
        note_skip(r, at, r->r.off, false);
    } else {
        note_skip(r, at, 0, true);
        reader_close(r);
    }
}

bool readers_open(reader *rs, size_t n, char **files, cat_skips *skips,
                  cat_failure *f)
{
    for (size_t k = 0; k < n; k++) {
        reader *r = &rs[k];
        memset(r, 0, sizeof *r);
        r->path = files[k];
        r->index = (unsigned)k;
        r->skips = skips;
        int rc = tk_tread_open(&r->r, files[k]);
        if (rc == -1) {
            fail(f, files[k], 0, CAT_NOFILE, strerror(errno));
            return false;
        }
        if (rc == -2) {
            fail(f, files[k], 0, CAT_NOTTRACE, "not a trace file");
            return false;
        }
        /* rc -3: cut before its magic was whole, damaged from its start
         * (left closed: its headers' turn says so) */
        r->open = rc == 0;
        r->x = xmalloc(sizeof(ei_x_buff));
        if (ei_x_new(r->x) != 0) {
            fail(f, files[k], 0, CAT_OUTPUT, "out of memory");
            return false;
        }
        r->dict_off = xmalloc(sizeof(size_t));
        r->dict_off[0] = 0;
        r->dict_off_cap = 1;
    }
    machine *ms = NULL;
    size_t nm = 0, mcap = 0;
    bool ok = true;
    for (size_t k = 0; k < n && ok; k++) {
        reader *r = &rs[k];
        if (!r->open) { /* cut before its magic was whole */
            if (skips != NULL)
                note_skip(r, 0, 0, true);
            else
                ok = (fail(f, r->path, 0, CAT_DAMAGED, "cut short (before its magic)"), false);
            continue;
        }
        uint64_t first = r->r.off;
        ok = header(r, &ms, &nm, &mcap, f);
        if (!ok && skips != NULL) {
            /* Its events on a scale of their own, from its next good
             * chunk on (as tracekit_file_reader reads them): the one after
             * a first chunk that checked out, or after damage the next
             * that checks out. */
            r->ref = (tk_anchor){0, 0};
            r->hz = 1000000000;
            if (r->r.off != first)
                note_skip(r, f->offset, r->r.off, false);
            else if (r->r.off >= r->r.size) {
                note_skip(r, f->offset, 0, true);
                reader_close(r);
            } else
                skip_to_next(r, f->offset);
            ok = true;
        }
    }
    for (size_t k = 0; k < nm; k++)
        free(ms[k].key);
    free(ms);
    return ok;
}

/* ---- chunks ----------------------------------------------------------------- */

/* A dictionary chunk: the entries that follow the ones read so far. */
static bool dict_chunk(reader *r, const unsigned char *p, size_t len)
{
    tk_dict_iter it;
    const unsigned char *e;
    size_t n;
    int rc;
    if (tk_dict_begin(&it, p, len) != 0 || it.first != r->ndict)
        return false;
    tree t = {.home = r->node};
    size_t ndict = r->ndict, dict_len = r->dict_len;
    while ((rc = tk_dict_next(&it, &e, &n)) == 1) {
        size_t at = 1;
        t.len = 0;
        /* Of a kind the writer makes (tk_ext.h), as the Erlang reader
         * takes them, then parsed for printing. */
        if (!tk_ext_entry_ok(tk_ext_check(e, n)) || etf_parse(&t, e, n, &at) < 0 || at != n) {
            rc = -1;
            break;
        }
        GROW(r->dict_lens, r->dict_lens_cap, r->ndict + 1);
        r->dict_lens[r->ndict] = (uint32_t)n;
        GROW(r->dict, r->dict_cap, r->dict_len + n - 1);
        memcpy(r->dict + r->dict_len, e + 1, n - 1);
        r->dict_len += n - 1;
        GROW(r->dict_off, r->dict_off_cap, r->ndict + 2);
        r->dict_off[++r->ndict] = r->dict_len;
    }
    free(t.v);
    if (rc != 0) { /* all or none, as the Erlang reader's dictionary */
        r->ndict = ndict;
        r->dict_len = dict_len;
    }
    return rc == 0;
}

/* An events chunk, decoded whole: a record that does not decode makes
 * the chunk bad (as tracekit_file:reader_events/3 counts it). NULL, or
 * why it is bad. Its decoded bytes are at most 9 times the chunk's (a FUN
 * term of 2 bytes, {'...', fun, <<>>}, is 17 bytes of external format), plus
 * what its references stand for: within TK_TFILE_EXPAND_MAX, or refused
 * before anything of it is decoded (FORMAT.md). */
static const char *events_chunk(reader *r, const unsigned char *p, size_t len)
{
    static const char bad[] = "a chunk that makes no sense";
    tk_events_iter it;
    uint64_t stamp, refs, expand = 0;
    const unsigned char *rec;
    size_t n;
    int rc;
    r->x->index = 0;
    r->nevs = r->next = 0;
    if (tk_events_begin(&it, p, len) != 0)
        return bad;
    while ((rc = tk_events_next(&it, &stamp, &rec, &n)) == 1)
        if (!tk_event_file_check(rec, n, r->dict_lens, r->ndict, &refs))
            return bad;
        else if ((expand += refs) > TK_TFILE_EXPAND_MAX)
            return "a chunk whose dictionary references stand for more than 16 MiB";
    if (rc != 0 || tk_events_begin(&it, p, len) != 0)
        return bad;
    while ((rc = tk_events_next(&it, &stamp, &rec, &n)) == 1) {
        size_t off = (size_t)r->x->index;
        if (decode_event(r, rec, n, r->x) != 0)
            return bad;
        GROW(r->evs, r->evs_cap, r->nevs + 1);
        r->evs[r->nevs++] = (cat_event){tk_stamp_time(r->ref, r->hz, stamp), off,
                                        (size_t)r->x->index - off};
    }
    return rc == 0 ? NULL : bad;
}

/* Whether the chunk at `at` is whole but for the end of the file: what a
 * node killed while writing leaves (a good head whose length runs past
 * the end). */
static bool cut_short(reader *r, uint64_t at)
{
    unsigned char head[TK_CHUNK_HEAD];
    if (at + TK_CHUNK_HEAD > r->r.size)
        return true;
    if (pread(r->r.fd, head, sizeof head, (off_t)at) != (ssize_t)sizeof head)
        return false;
    uint32_t sync, len;
    memcpy(&sync, head, 4);
    memcpy(&len, head + 8, 4);
    return sync == TK_TFILE_SYNC && at + TK_CHUNK_HEAD + len > r->r.size;
}

int reader_fill(reader *r, cat_failure *f)
{
    while (r->open && r->next >= r->nevs) {
        unsigned type;
        const unsigned char *p;
        size_t len;
        uint64_t at = r->r.off, count, stamp;
        int rc = tk_tread_next(&r->r, &type, &p, &len);
        if (rc == TK_TREAD_EOF && !r->ended) {
            /* No end chunk (FORMAT.md): the writer was killed, its disk
             * was full when it closed, or it is still writing. */
            if (r->skips != NULL) {
                note_skip(r, at, 0, true);
                reader_close(r);
                return 0;
            }
            fail(f, r->path, at, CAT_DAMAGED, "cut short (no end chunk)");
            return -1;
        }
        if (rc == TK_TREAD_EOF) {
            reader_close(r);
            return 0;
        }
        if (rc == TK_TREAD_CORRUPT) {
            if (r->skips != NULL) {
                skip_to_next(r, at);
                continue;
            }
            fail(f, r->path, at, CAT_DAMAGED, cut_short(r, at) ? "cut short" : "a damaged chunk");
            return -1;
        }
        bool ok;
        const char *why = "a chunk that makes no sense";
        if (r->ended) /* the end chunk is a file's last */
            type = TK_CHUNK_HEADER;
        switch (type) {
        case TK_CHUNK_DICT:
            ok = dict_chunk(r, p, len);
            break;
        case TK_CHUNK_EVENTS:
            r->nevs = r->next = 0;
            ok = (why = events_chunk(r, p, len)) == NULL;
            if (!ok)
                r->nevs = r->next = 0;
            break;
        case TK_CHUNK_LOST:
            ok = tk_lost_read(p, len, &count, &stamp) == 0;
            if (ok)
                r->lost += count;
            break;
        case TK_CHUNK_END:
            ok = r->ended = true;
            break;
        default:
            /* a chunk type of a later version is stepped over; a header
             * is only ever the first chunk */
            ok = type > TK_CHUNK_END;
            break;
        }
        if (!ok && r->skips != NULL) {
            /* It checked out but makes no sense: stepped over. */
            note_skip(r, at, at + TK_CHUNK_HEAD + len, false);
        } else if (!ok) {
            fail(f, r->path, at, CAT_DAMAGED, why);
            return -1;
        }
    }
    return r->next < r->nevs ? 1 : 0;
}

void reader_close(reader *r)
{
    if (r->open)
        tk_tread_close(&r->r);
    r->open = false;
}

void reader_free(reader *r)
{
    reader_close(r);
    if (r->x != NULL)
        ei_x_free(r->x);
    free(r->x);
    free(r->node);
    free(r->dict);
    free(r->dict_off);
    free(r->dict_lens);
    free(r->evs);
    free(r->scratch.v);
    memset(r, 0, sizeof *r);
}
