/* tk_tfile.h: trace files (FORMAT.md): chunks written to a file or a wrap
 * set of files, and read back with their checks.
 *
 * Writing is done by one thread (the tracer's writer thread); the file
 * descriptor, counters and sequence are its own, read by others only as
 * statistics. What a chunk holds is the caller's business; this layer
 * frames it (sync word, type, length, CRC-32C), writes it with one
 * writev, rotates the files of a wrap set, and counts what it could not
 * write.
 *
 * Reading keeps one chunk in memory at a time, so a file of any size is
 * read in the memory of its largest chunk.
 */
#ifndef TK_TFILE_H
#define TK_TFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The magic of the files written: "TKTRACE" and the format's version. The
 * readers read version 1 too (its records are rewritten in today's form
 * as their chunks are read: tk_event_from_v1). */
#define TK_TFILE_MAGIC "TKTRACE2"
#define TK_TFILE_MAGIC_LEN 8
#define TK_TFILE_VERSION 2
#define TK_TFILE_SYNC 0x4B434B54u /* "TKCK" */
#define TK_CHUNK_HEAD 16u         /* sync, type, flags, reserved, length, crc */
#define TK_CHUNK_MAX (1u << 30)   /* the largest payload a reader accepts */
/* The most an events chunk's dictionary references may stand for: the
 * sum, over its records, of the bytes of the entry each reference names
 * (tk_event_file_check). Readers refuse a chunk over it; the writer ends a
 * chunk before it, and leaves out (counted) a record over it alone. */
#define TK_TFILE_EXPAND_MAX (16u << 20)

enum {
    TK_CHUNK_HEADER = 1,
    TK_CHUNK_DICT = 2,
    TK_CHUNK_EVENTS = 3,
    TK_CHUNK_LOST = 4,
    TK_CHUNK_END = 5
};

/* ---- writing --------------------------------------------------------------- */

/* The permission bits of a trace file: owner read and write, and what
 * else a caller asks for of read and write (0600 .. 0666). */
#define TK_TFILE_MODE 0600u
static inline int tk_tfile_mode_ok(unsigned mode)
{
    return (mode & ~0666u) == 0 && (mode & 0600u) == 0600u;
}

typedef struct {
    char *base;          /* the path, or a wrap set's base name */
    unsigned mode;       /* the files' permission bits */
    uint64_t file_bytes; /* wrap set: bytes per file; 0: one file */
    unsigned count;      /* wrap set: files in turn */
    uint64_t max_bytes;  /* 0: no limit on the bytes of all files */
    int fd;              /* -1 when no file is open */
    uint64_t seq;        /* the open file's sequence number */
    uint64_t in_file;    /* bytes written to the open file */
    uint64_t total;      /* bytes written in all */
    uint64_t write_errors;
    int last_errno;
    bool need_magic;     /* the open file does not begin with the magic yet */
    bool regular;        /* the open file is a regular file (not a device) */
    bool cut_pending;    /* a failed write left bytes after in_file that a
                            truncation has not taken back yet */
} tk_tfile;

/* The name of file `seq` of a set: the path itself, or base.N with N =
 * seq mod count for a wrap set. Returns the length (as snprintf). */
int tk_tfile_name(const tk_tfile *f, uint64_t seq, char *out, size_t cap);

/* Opens file 0 and writes the magic. 0, or -1 with errno set (the file
 * could not be created: a missing directory, no permission, something
 * else already there). file_bytes 0: a single file.
 *
 * Every file of a set is made new (O_CREAT | O_EXCL | O_NOFOLLOW), its
 * permission bits exactly `mode` (tk_tfile_mode_ok): nothing is ever
 * written through a symbolic link or into a file someone else made. A
 * trace file of this user already at the name (tk_tfile_is_ours: an
 * earlier trace, or one cut before its magic was whole) is removed
 * first; anything else there is left alone and refused: EEXIST, or
 * ESPIPE for a FIFO or socket, EISDIR for a directory. A character
 * device (/dev/null) is written as it is. */
int tk_tfile_open(tk_tfile *f, const char *base, uint64_t file_bytes,
                  unsigned count, uint64_t max_bytes, unsigned mode);

/* Whether `name` in directory `dir` (a descriptor, or AT_FDCWD) is a
 * trace file of this user: a regular file (not followed through a
 * symbolic link) owned by the effective user, starting with the magic
 * or cut before it was whole (what it holds begins the magic). */
bool tk_tfile_is_ours(int dir, const char *name);

/* Makes a directory of this user's own in `parent`: parent/prefix
 * followed by 12 characters from the kernel's random source, made new
 * (it did not exist), mode 0700 exactly. Its path goes to out (cap
 * bytes). 0, or -1 with errno set: ENOTDIR when parent is not a
 * directory, EINVAL when prefix holds a slash, ENAMETOOLONG. */
int tk_tfile_private_dir(const char *parent, const char *prefix, char *out,
                         size_t cap);

/* Bytes the open file of a wrap set may still take (UINT64_MAX for a
 * single file). */
uint64_t tk_tfile_room(const tk_tfile *f);

/* Moves to the next file of a wrap set (reusing the oldest once there are
 * `count`), writes its magic. 0, or -1 (counted as a write error; when
 * the file was made but its magic not written, the next chunk writes it
 * first). */
int tk_tfile_rotate(tk_tfile *f);

/* Writes one chunk. 0 when written; 1 when the total size limit refuses
 * it (nothing is written); -1 on a write error (counted).
 *
 * A chunk is in the file whole or not at all (FORMAT.md): a write that
 * stops part way (a full disk, the file size limit) is taken back by
 * truncating the file to where the chunk began, so that the chunks
 * written once there is room again follow the last whole one. (If the
 * truncation fails too, it is tried again before the next chunk, which is
 * refused while it fails.) */
int tk_tfile_chunk(tk_tfile *f, unsigned type, const void *payload,
                   size_t len);

/* Flushes to the device (fdatasync). 0 or -1. */
int tk_tfile_sync(tk_tfile *f);

void tk_tfile_close(tk_tfile *f);

/* ---- reading ---------------------------------------------------------------- */

typedef struct {
    int fd;
    uint64_t off;    /* where the next chunk starts */
    uint64_t size;   /* the file's size when opened */
    unsigned char *buf;
    size_t cap;
    unsigned version; /* the file's format: 1 or TK_TFILE_VERSION */
    unsigned char *conv; /* version 1: an events chunk in today's form */
    size_t conv_cap;
} tk_tread;

enum {
    TK_TREAD_CHUNK = 1,   /* a chunk was read */
    TK_TREAD_EOF = 0,     /* no more chunks: the file ends on a chunk */
    TK_TREAD_CORRUPT = -1 /* a damaged or cut chunk at r->off */
};

/* Opens a trace file. 0; -1 with errno set if it cannot be read; -2 if it
 * is not a trace file (no magic); -3 if it is one cut before its magic
 * was whole (shorter than the magic, and what it holds begins it: a file
 * of a set whose writer was killed as it made the file). */
int tk_tread_open(tk_tread *r, const char *path);

/* The next chunk: TK_TREAD_CHUNK with *type, *payload and *len (the
 * payload stays valid until the next call; the records of a version 1
 * file's events chunk in today's form, each that is not a well-formed one
 * of version 1 left empty, which no reader accepts), TK_TREAD_EOF, or
 * TK_TREAD_CORRUPT (r->off is where the bad chunk starts; nothing has been
 * consumed). */
int tk_tread_next(tk_tread *r, unsigned *type, const unsigned char **payload,
                  size_t *len);

/* After TK_TREAD_CORRUPT: finds the next chunk that checks out after
 * r->off. 1 when there is one (r->off is there), 0 when there is none. */
int tk_tread_resync(tk_tread *r);

void tk_tread_close(tk_tread *r);

/* ---- chunk payloads ------------------------------------------------------------ */

/* A stamp and the system time (ns since the epoch) read together. */
typedef struct {
    uint64_t stamp, system;
} tk_anchor;

/* The system time of a stamp (ns), on the scale of a reference anchor of
 * its machine and its stamps per second: every stamp of one machine maps
 * to time by the same line, so the order of stamps is kept. */
int64_t tk_stamp_time(tk_anchor ref, uint64_t hz, uint64_t stamp);

/* An events chunk: its anchor, then records. */
typedef struct {
    const unsigned char *p, *end;
    tk_anchor anchor;
    uint32_t left; /* records not read yet */
} tk_events_iter;

/* 0, or -1 if the payload is not an events chunk's. */
int tk_events_begin(tk_events_iter *it, const unsigned char *payload,
                    size_t len);
/* The next record: 1 with its stamp and event record, 0 after the last,
 * -1 if the chunk is malformed. */
int tk_events_next(tk_events_iter *it, uint64_t *stamp,
                   const unsigned char **rec, size_t *len);

/* A dictionary chunk: numbered entries in the external term format. */
typedef struct {
    const unsigned char *p, *end;
    uint32_t first; /* the number of the first entry */
    uint32_t left;
} tk_dict_iter;

int tk_dict_begin(tk_dict_iter *it, const unsigned char *payload, size_t len);
/* 1 with the next entry, 0 after the last, -1 if malformed. */
int tk_dict_next(tk_dict_iter *it, const unsigned char **ext, size_t *len);

/* ---- building chunk payloads (the writer) ----------------------------------- */

/* A growable byte buffer (tk_mem memory). */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} tk_bytes;

/* Room for `more` bytes after len. 0, or -1 when out of memory. */
int tk_bytes_reserve(tk_bytes *b, size_t more);
void tk_bytes_free(tk_bytes *b);

/* An events chunk in b: start, then each record's room (NULL when out of
 * memory; the record's len bytes go there), then the anchor and count. */
#define TK_EVENTS_HEAD 20u /* anchor stamp, anchor system, count */
#define TK_EVENTS_REC_HEAD 12u /* length, stamp */
void tk_events_start(tk_bytes *b);
unsigned char *tk_events_add(tk_bytes *b, uint64_t stamp, size_t len);
/* The record just added (at, len bytes) holds only n bytes: shorten it. */
void tk_events_shrink(tk_bytes *b, unsigned char *at, size_t len, size_t n);
void tk_events_finish(tk_bytes *b, tk_anchor a, uint32_t count);

/* A dictionary chunk in b, its first entry numbered `first`. */
void tk_dict_start(tk_bytes *b, uint32_t first);
int tk_dict_add(tk_bytes *b, const void *ext, size_t len);
void tk_dict_finish(tk_bytes *b, uint32_t count);

/* A lost chunk's payload (16 bytes). */
void tk_lost_make(unsigned char out[16], uint64_t count, uint64_t stamp);

/* A lost chunk: how many events were refused, and the stamp when. */
int tk_lost_read(const unsigned char *payload, size_t len, uint64_t *count,
                 uint64_t *stamp);

#endif
