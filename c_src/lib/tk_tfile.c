#include "tk_tfile.h"

#include "tk_term.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tk_crc32c.h"
#include "tk_mem.h"

/* ---- the chunk head ------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4); /* little-endian machines only (tk_term.c checks) */
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The CRC of a chunk: its type, flags, reserved and length bytes, then its
 * payload. */
static uint32_t chunk_crc(const unsigned char *head, const void *payload,
                          size_t len)
{
    return tk_crc32c(tk_crc32c(0, head + 4, 8), payload, len);
}

static void make_head(unsigned char head[TK_CHUNK_HEAD], unsigned type,
                      const void *payload, size_t len)
{
    put32(head, TK_TFILE_SYNC);
    head[4] = (unsigned char)type;
    head[5] = 0;
    head[6] = head[7] = 0;
    put32(head + 8, (uint32_t)len);
    put32(head + 12, chunk_crc(head, payload, len));
}

/* ---- writing --------------------------------------------------------------- */

int tk_tfile_name(const tk_tfile *f, uint64_t seq, char *out, size_t cap)
{
    if (f->file_bytes == 0)
        return snprintf(out, cap, "%s", f->base);
    return snprintf(out, cap, "%s.%llu", f->base,
                    (unsigned long long)(seq % f->count));
}

/* Writes all of iov, going on after partial writes. 0, or -1. */
static int write_all(tk_tfile *f, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(f->fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            f->last_errno = errno;
            f->write_errors++;
            return -1;
        }
        size_t done = (size_t)w;
        f->in_file += done;
        f->total += done;
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

/* The magic of a regular file of `size` bytes open at fd: 0 whole; 1 a
 * file cut before it was whole (shorter than the magic, what it holds the
 * magic's beginning, nothing included: a writer killed as it made the
 * file, or a first write taken back); -1 not a trace file. The one rule
 * of the writer (tk_tfile_is_ours) and the readers (tk_tread_open). */
static int magic_of(int fd, uint64_t size, unsigned *version)
{
    char magic[TK_TFILE_MAGIC_LEN];
    size_t n = size < sizeof magic ? (size_t)size : sizeof magic;
    if (pread(fd, magic, n, 0) != (ssize_t)n)
        return -1;
    *version = TK_TFILE_VERSION;
    if (memcmp(magic, TK_TFILE_MAGIC, n) == 0)
        return n < sizeof magic ? 1 : 0;
    if (n == sizeof magic && memcmp(magic, "TKTRACE1", n) == 0) {
        *version = 1;
        return 0;
    }
    return -1;
}

bool tk_tfile_is_ours(int dir, const char *name)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
               magic_of(fd, (uint64_t)st.st_size, &(unsigned){0}) >= 0;
    close(fd);
    return yes;
}

/* A character device at `name` (written as it is), opened non-blocking. */
static int open_device(const char *name)
{
    return open(name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
}

/* A new file at `name` for writing (tk_tfile_open says which). The
 * descriptor, or -1 with errno set. */
static int create_file(const char *name, unsigned mode)
{
    struct stat st;
    if (lstat(name, &st) == 0) {
        if (S_ISCHR(st.st_mode))
            return open_device(name);
        if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
            errno = ESPIPE; /* writes would wait for a reader */
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            errno = EISDIR;
            return -1;
        }
        if (!tk_tfile_is_ours(AT_FDCWD, name)) {
            errno = EEXIST;
            return -1;
        }
        if (unlink(name) != 0 && errno != ENOENT)
            return -1;
    } else if (errno != ENOENT) {
        return -1;
    }
    /* Made new, never followed: if anything took the name meanwhile, this
     * fails with EEXIST. Created 0600 (less under a umask), then given
     * exactly the bits asked for. */
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
                  TK_TFILE_MODE);
    if (fd >= 0 && fchmod(fd, mode) != 0) {
        int e = errno;
        close(fd);
        (void)unlink(name);
        errno = e;
        return -1;
    }
    return fd;
}

/* Takes back what a failed write left after `at`: the file ends at `at`
 * again and the next write goes there. 0, or -1 (errno set). */
static int cut_back(tk_tfile *f, uint64_t at)
{
    if (!f->regular)
        return 0; /* a device keeps nothing to take back */
    if (ftruncate(f->fd, (off_t)at) != 0 || lseek(f->fd, (off_t)at, SEEK_SET) != (off_t)at)
        return -1;
    return 0;
}

/* Writes iov (n entries) as one piece: all of it, or nothing that stays
 * in the file (see tk_tfile_chunk). 0, or -1 (counted). */
static int write_whole(tk_tfile *f, struct iovec *iov, int n)
{
    uint64_t in_file = f->in_file, total = f->total;
    if (f->cut_pending) {
        if (cut_back(f, in_file) != 0) {
            f->last_errno = errno;
            f->write_errors++;
            return -1;
        }
        f->cut_pending = false;
    }
    if (write_all(f, iov, n) == 0)
        return 0;
    /* Part of it may be in the file: not one byte of it stays. */
    f->in_file = in_file;
    f->total = total;
    f->cut_pending = cut_back(f, in_file) != 0;
    return -1;
}

/* The magic, when the open file does not begin with it yet. */
static int write_magic(tk_tfile *f)
{
    struct iovec iov = {(void *)TK_TFILE_MAGIC, TK_TFILE_MAGIC_LEN};
    if (!f->need_magic)
        return 0;
    if (write_whole(f, &iov, 1) != 0)
        return -1;
    f->need_magic = false;
    return 0;
}

/* Opens file f->seq, made new, and writes the magic. */
static int open_current(tk_tfile *f)
{
    char name[4096];
    if (tk_tfile_name(f, f->seq, name, sizeof name) >= (int)sizeof name) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Non-blocking: opening a FIFO for writing would wait for a reader,
     * in the caller's thread (a scheduler) for as long as none comes. */
    int fd = create_file(name, f->mode);
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fd < 0) {
        if (errno == ENXIO && stat(name, &st) == 0 && S_ISFIFO(st.st_mode))
            errno = ESPIPE; /* a FIFO that nobody reads */
        return -1;
    }
    /* Only files and devices: writes to a pipe or socket wait for their
     * reader, and close/1 would wait with them. */
    if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) ? ESPIPE : e;
        return -1;
    }
    f->fd = fd;
    f->in_file = 0;
    f->regular = S_ISREG(st.st_mode);
    f->cut_pending = false;
    f->need_magic = true;
    return write_magic(f);
}

int tk_tfile_open(tk_tfile *f, const char *base, uint64_t file_bytes,
                  unsigned count, uint64_t max_bytes, unsigned mode)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!tk_tfile_mode_ok(mode)) {
        errno = EINVAL;
        return -1;
    }
    f->mode = mode;
    size_t n = strlen(base);
    f->base = tk_mem_alloc(n + 1);
    if (f->base == NULL) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(f->base, base, n + 1);
    f->file_bytes = count > 0 ? file_bytes : 0;
    f->count = f->file_bytes > 0 ? count : 1;
    f->max_bytes = max_bytes;
    if (open_current(f) != 0) {
        int e = errno;
        tk_tfile_close(f);
        errno = e;
        return -1;
    }
    return 0;
}

uint64_t tk_tfile_room(const tk_tfile *f)
{
    if (f->file_bytes == 0)
        return UINT64_MAX;
    return f->in_file < f->file_bytes ? f->file_bytes - f->in_file : 0;
}

int tk_tfile_rotate(tk_tfile *f)
{
    if (f->file_bytes == 0)
        return 0;
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    f->seq++;
    if (open_current(f) != 0) {
        if (f->fd < 0) { /* could not even open it */
            f->last_errno = errno;
            f->write_errors++;
        }
        return -1;
    }
    return 0;
}

int tk_tfile_chunk(tk_tfile *f, unsigned type, const void *payload,
                   size_t len)
{
    size_t magic = f->need_magic ? TK_TFILE_MAGIC_LEN : 0;
    if (f->max_bytes != 0 && f->total + magic + TK_CHUNK_HEAD + len > f->max_bytes)
        return 1;
    if (f->fd < 0) {
        f->write_errors++;
        return -1;
    }
    if (write_magic(f) != 0)
        return -1;
    unsigned char head[TK_CHUNK_HEAD];
    make_head(head, type, payload, len);
    struct iovec iov[2] = {{head, TK_CHUNK_HEAD}, {(void *)payload, len}};
    return write_whole(f, iov, len > 0 ? 2 : 1);
}

int tk_tfile_sync(tk_tfile *f)
{
    if (f->fd < 0 || fdatasync(f->fd) != 0) {
        f->last_errno = f->fd < 0 ? EBADF : errno;
        f->write_errors++;
        return -1;
    }
    return 0;
}

void tk_tfile_close(tk_tfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    tk_mem_free(f->base);
    f->base = NULL;
}

/* ---- directories of one's own ------------------------------------------------ */

int tk_tfile_private_dir(const char *parent, const char *prefix, char *out,
                         size_t cap)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    struct stat st;
    if (strchr(prefix, '/') != NULL) {
        errno = EINVAL;
        return -1;
    }
    if (stat(parent, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        /* 12 characters of 62: 71 bits from the kernel's random source
         * (bytes of 248 and more are drawn again, so that each character
         * is equally likely). */
        char name[13];
        for (size_t k = 0; k < 12;) {
            unsigned char b[32];
            if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
                return -1;
            for (size_t i = 0; i < sizeof b && k < 12; i++)
                if (b[i] < 248)
                    name[k++] = alphabet[b[i] % 62];
        }
        name[12] = 0;
        size_t plen = strlen(parent);
        while (plen > 1 && parent[plen - 1] == '/')
            plen--;
        int n = snprintf(out, cap, "%.*s%s%s%s", (int)plen, parent,
                         parent[plen - 1] == '/' ? "" : "/", prefix, name);
        if (n < 0 || (size_t)n >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (mkdir(out, 0700) != 0) {
            if (errno == EEXIST)
                continue;
            return -1;
        }
        /* 0700 exactly, whatever the umask took away; through a descriptor
         * of the directory just made, never a link put in its place. */
        int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, 0700) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            (void)rmdir(out);
            errno = e;
            return -1;
        }
        close(fd);
        return 0;
    }
    errno = EEXIST;
    return -1;
}

/* ---- reading ---------------------------------------------------------------- */

int tk_tread_open(tk_tread *r, const char *path)
{
    memset(r, 0, sizeof *r);
    /* Non-blocking: opening a FIFO would wait for a writer, in the
     * caller's thread (a scheduler). */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0)
        return -1;
    struct stat st;
    if (fstat(r->fd, &st) != 0) {
        int e = errno;
        tk_tread_close(r);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* a trace file has a size and offsets */
        tk_tread_close(r);
        return -2;
    }
    r->size = (uint64_t)st.st_size;
    int magic = magic_of(r->fd, r->size, &r->version);
    if (magic != 0) {
        tk_tread_close(r);
        return magic < 0 ? -2 : -3;
    }
    r->off = TK_TFILE_MAGIC_LEN;
    return 0;
}

/* Reads exactly n bytes at off into p; 0 or -1. */
static int read_at(tk_tread *r, void *p, size_t n, uint64_t off)
{
    unsigned char *q = p;
    while (n > 0) {
        ssize_t got = pread(r->fd, q, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        q += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

/* Whether a good chunk starts at off; loads its payload into r->buf. */
static int chunk_at(tk_tread *r, uint64_t off, unsigned *type, size_t *len)
{
    unsigned char head[TK_CHUNK_HEAD];
    if (off + TK_CHUNK_HEAD > r->size || read_at(r, head, TK_CHUNK_HEAD, off) != 0 ||
        get32(head) != TK_TFILE_SYNC || head[5] != 0 || head[6] != 0 || head[7] != 0)
        return 0;
    uint32_t n = get32(head + 8);
    if (n > TK_CHUNK_MAX || off + TK_CHUNK_HEAD + n > r->size)
        return 0;
    if (n > r->cap) {
        unsigned char *b = tk_mem_alloc(n);
        if (b == NULL)
            return 0;
        tk_mem_free(r->buf);
        r->buf = b;
        r->cap = n;
    }
    if (read_at(r, r->buf, n, off + TK_CHUNK_HEAD) != 0 ||
        chunk_crc(head, r->buf, n) != get32(head + 12))
        return 0;
    *type = head[4];
    *len = n;
    return 1;
}

/* A version 1 events chunk in today's form, into r->conv: 0, or -1 (out
 * of memory, or not an events chunk: it is then given as it is, and its
 * reader refuses it). */
static int from_v1(tk_tread *r, const unsigned char *p, size_t len, size_t *out_len)
{
    tk_events_iter it;
    uint64_t stamp;
    const unsigned char *rec;
    size_t n;
    int rc;
    size_t need = TK_EVENTS_HEAD + TK_EVENT_V1_ROOM(len);
    if (tk_events_begin(&it, p, len) != 0)
        return -1;
    if (need > r->conv_cap) {
        unsigned char *b = tk_mem_alloc(need);
        if (b == NULL)
            return -1;
        tk_mem_free(r->conv);
        r->conv = b;
        r->conv_cap = need;
    }
    unsigned char *q = r->conv;
    memcpy(q, p, TK_EVENTS_HEAD);
    q += TK_EVENTS_HEAD;
    while ((rc = tk_events_next(&it, &stamp, &rec, &n)) == 1) {
        uint32_t m = (uint32_t)tk_event_from_v1(rec, n, q + TK_EVENTS_REC_HEAD);
        memcpy(q, &m, 4);
        memcpy(q + 4, &stamp, 8);
        q += TK_EVENTS_REC_HEAD + m;
    }
    if (rc != 0)
        return -1;
    *out_len = (size_t)(q - r->conv);
    return 0;
}

int tk_tread_next(tk_tread *r, unsigned *type, const unsigned char **payload,
                  size_t *len)
{
    if (r->off >= r->size)
        return TK_TREAD_EOF;
    if (!chunk_at(r, r->off, type, len))
        return TK_TREAD_CORRUPT;
    *payload = r->buf;
    r->off += TK_CHUNK_HEAD + *len;
    size_t n;
    if (r->version == 1 && *type == TK_CHUNK_EVENTS && from_v1(r, r->buf, *len, &n) == 0) {
        *payload = r->conv;
        *len = n;
    }
    return TK_TREAD_CHUNK;
}

int tk_tread_resync(tk_tread *r)
{
    unsigned char block[65536];
    unsigned type;
    size_t len;
    for (uint64_t at = r->off + 1; at + TK_CHUNK_HEAD <= r->size;) {
        size_t n = sizeof block;
        if (at + n > r->size)
            n = (size_t)(r->size - at);
        if (read_at(r, block, n, at) != 0)
            return 0;
        for (size_t i = 0; i + 4 <= n; i++)
            if (get32(block + i) == TK_TFILE_SYNC && chunk_at(r, at + i, &type, &len)) {
                r->off = at + i;
                return 1;
            }
        at += n > 3 ? n - 3 : 1; /* a sync word may straddle blocks */
    }
    return 0;
}

void tk_tread_close(tk_tread *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    tk_mem_free(r->buf);
    r->buf = NULL;
    r->cap = 0;
    tk_mem_free(r->conv);
    r->conv = NULL;
    r->conv_cap = 0;
}

/* ---- chunk payloads ------------------------------------------------------------ */

static int take(const unsigned char **p, const unsigned char *end, void *out,
                size_t n)
{
    if ((size_t)(end - *p) < n)
        return -1;
    memcpy(out, *p, n);
    *p += n;
    return 0;
}

int64_t tk_stamp_time(tk_anchor ref, uint64_t hz, uint64_t stamp)
{
    double ticks = (double)(int64_t)(stamp - ref.stamp);
    double ns = hz > 0 ? ticks * 1e9 / (double)hz : ticks;
    return (int64_t)ref.system + (int64_t)ns;
}

int tk_events_begin(tk_events_iter *it, const unsigned char *payload,
                    size_t len)
{
    it->p = payload;
    it->end = payload + len;
    return take(&it->p, it->end, &it->anchor.stamp, 8) == 0 &&
                   take(&it->p, it->end, &it->anchor.system, 8) == 0 &&
                   take(&it->p, it->end, &it->left, 4) == 0
               ? 0
               : -1;
}

int tk_events_next(tk_events_iter *it, uint64_t *stamp,
                   const unsigned char **rec, size_t *len)
{
    uint32_t n;
    if (it->left == 0)
        return it->p == it->end ? 0 : -1;
    if (take(&it->p, it->end, &n, 4) != 0 || take(&it->p, it->end, stamp, 8) != 0 ||
        (size_t)(it->end - it->p) < n)
        return -1;
    *rec = it->p;
    *len = n;
    it->p += n;
    it->left--;
    return 1;
}

int tk_dict_begin(tk_dict_iter *it, const unsigned char *payload, size_t len)
{
    it->p = payload;
    it->end = payload + len;
    return take(&it->p, it->end, &it->first, 4) == 0 &&
                   take(&it->p, it->end, &it->left, 4) == 0
               ? 0
               : -1;
}

int tk_dict_next(tk_dict_iter *it, const unsigned char **ext, size_t *len)
{
    uint32_t n;
    if (it->left == 0)
        return it->p == it->end ? 0 : -1;
    if (take(&it->p, it->end, &n, 4) != 0 || (size_t)(it->end - it->p) < n)
        return -1;
    *ext = it->p;
    *len = n;
    it->p += n;
    it->left--;
    return 1;
}

int tk_lost_read(const unsigned char *payload, size_t len, uint64_t *count,
                 uint64_t *stamp)
{
    const unsigned char *p = payload;
    return len == 16 && take(&p, payload + len, count, 8) == 0 &&
                   take(&p, payload + len, stamp, 8) == 0
               ? 0
               : -1;
}

/* ---- building chunk payloads -------------------------------------------------- */

int tk_bytes_reserve(tk_bytes *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *q = tk_mem_realloc(b->p, b->len, cap);
    if (q == NULL)
        return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

void tk_bytes_free(tk_bytes *b)
{
    tk_mem_free(b->p);
    *b = (tk_bytes){NULL, 0, 0};
}

static void put(tk_bytes *b, const void *v, size_t n)
{
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

void tk_events_start(tk_bytes *b)
{
    b->len = 0;
    if (tk_bytes_reserve(b, TK_EVENTS_HEAD) == 0)
        b->len = TK_EVENTS_HEAD;
}

unsigned char *tk_events_add(tk_bytes *b, uint64_t stamp, size_t len)
{
    uint32_t n = (uint32_t)len;
    if (b->len < TK_EVENTS_HEAD || len > UINT32_MAX ||
        tk_bytes_reserve(b, TK_EVENTS_REC_HEAD + len) != 0)
        return NULL;
    put(b, &n, 4);
    put(b, &stamp, 8);
    unsigned char *at = b->p + b->len;
    b->len += len;
    return at;
}

void tk_events_shrink(tk_bytes *b, unsigned char *at, size_t len, size_t n)
{
    uint32_t n32 = (uint32_t)n;
    memcpy(at - TK_EVENTS_REC_HEAD, &n32, 4);
    b->len -= len - n;
}

void tk_events_finish(tk_bytes *b, tk_anchor a, uint32_t count)
{
    if (b->len < TK_EVENTS_HEAD)
        return;
    memcpy(b->p, &a.stamp, 8);
    memcpy(b->p + 8, &a.system, 8);
    memcpy(b->p + 16, &count, 4);
}

void tk_dict_start(tk_bytes *b, uint32_t first)
{
    b->len = 0;
    if (tk_bytes_reserve(b, 8) == 0) {
        put(b, &first, 4);
        b->len += 4; /* the count, filled in by tk_dict_finish */
    }
}

int tk_dict_add(tk_bytes *b, const void *ext, size_t len)
{
    uint32_t n = (uint32_t)len;
    if (b->len < 8 || len > UINT32_MAX || tk_bytes_reserve(b, 4 + len) != 0)
        return -1;
    put(b, &n, 4);
    put(b, ext, len);
    return 0;
}

void tk_dict_finish(tk_bytes *b, uint32_t count)
{
    if (b->len >= 8)
        memcpy(b->p + 4, &count, 4);
}

void tk_lost_make(unsigned char out[16], uint64_t count, uint64_t stamp)
{
    memcpy(out, &count, 8);
    memcpy(out + 8, &stamp, 8);
}
