/* Tests of trace file framing (tk_tfile): chunks written and read back,
 * wrap sets, size limits, write errors, and files cut short or damaged. */
#include "tk_tfile.h"
#include "tk_test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory for a test's files. */
static void temp_dir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/tk_tfile_XXXXXX");
    if (mkdtemp(out) == NULL)
        abort();
}

static void remove_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        abort();
}

/* Payload of chunk i: its number, then bytes derived from it. */
static size_t payload(unsigned i, unsigned char *p)
{
    size_t n = 4 + (i * 37) % 300;
    memcpy(p, &i, 4);
    for (size_t k = 4; k < n; k++)
        p[k] = (unsigned char)(i + k);
    return n;
}

/* Reads every chunk: how many in order, stopping at the first that is not
 * chunk number `next`. */
static unsigned read_all(const char *path, int *last)
{
    tk_tread r;
    unsigned type, n = 0;
    const unsigned char *p;
    size_t len;
    unsigned char want[400];
    if (tk_tread_open(&r, path) != 0)
        return 0;
    while ((*last = tk_tread_next(&r, &type, &p, &len)) == TK_TREAD_CHUNK) {
        size_t wl = payload(n, want);
        if (type != TK_CHUNK_EVENTS || len != wl || memcmp(p, want, wl) != 0)
            break;
        n++;
    }
    tk_tread_close(&r);
    return n;
}

TK_TEST(tfile_chunks_round_trip)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t", dir);
    tk_tfile f;
    unsigned char p[400];
    TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE) == 0);
    for (unsigned i = 0; i < 500; i++)
        TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)) == 0);
    TK_CHECK_EQ(tk_tfile_sync(&f), 0);
    uint64_t total = f.total;
    tk_tfile_close(&f);
    int last;
    TK_CHECK_EQ(read_all(path, &last), 500);
    TK_CHECK_EQ(last, TK_TREAD_EOF);
    FILE *fp = fopen(path, "rb");
    TK_REQUIRE(fp != NULL);
    fseek(fp, 0, SEEK_END);
    TK_CHECK_EQ(ftell(fp), (long)total);
    fclose(fp);
    remove_dir(dir);
}

/* A file cut anywhere reads its complete chunks, then says where the cut
 * chunk starts; nothing after the cut is made up. */
TK_TEST(tfile_cut_short_reads_complete_chunks)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t", dir);
    tk_tfile f;
    unsigned char p[400];
    uint64_t ends[21];
    TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE) == 0);
    ends[0] = f.total;
    for (unsigned i = 0; i < 20; i++) {
        TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)) == 0);
        ends[i + 1] = f.total;
    }
    tk_tfile_close(&f);
    for (uint64_t cut = ends[0]; cut < ends[20]; cut += 7) {
        TK_REQUIRE(truncate(path, (off_t)cut) == 0);
        unsigned complete = 0;
        while (complete < 20 && ends[complete + 1] <= cut)
            complete++;
        int last;
        TK_CHECK_EQ(read_all(path, &last), complete);
        TK_CHECK_EQ(last, cut == ends[complete] ? TK_TREAD_EOF : TK_TREAD_CORRUPT);
        /* Put the file back for the next cut. */
        TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE) == 0);
        for (unsigned i = 0; i < 20; i++)
            TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)) == 0);
        tk_tfile_close(&f);
    }
    remove_dir(dir);
}

/* A changed byte makes its chunk corrupt; the reader can go on at the next
 * good chunk. */
TK_TEST(tfile_damage_is_found_and_skipped)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t", dir);
    tk_tfile f;
    unsigned char p[400];
    uint64_t ends[11];
    TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE) == 0);
    ends[0] = f.total;
    for (unsigned i = 0; i < 10; i++) {
        TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)) == 0);
        ends[i + 1] = f.total;
    }
    tk_tfile_close(&f);
    /* Damage chunk 4, anywhere in it. */
    for (uint64_t at = ends[4]; at < ends[5]; at += 5) {
        int fd = open(path, O_RDWR);
        TK_REQUIRE(fd >= 0);
        unsigned char b;
        TK_REQUIRE(pread(fd, &b, 1, (off_t)at) == 1);
        b ^= 0x5a;
        TK_REQUIRE(pwrite(fd, &b, 1, (off_t)at) == 1);
        tk_tread r;
        unsigned type, n = 0;
        const unsigned char *q;
        size_t len;
        TK_REQUIRE(tk_tread_open(&r, path) == 0);
        int rc;
        while ((rc = tk_tread_next(&r, &type, &q, &len)) == TK_TREAD_CHUNK)
            n++;
        TK_CHECK_EQ(n, 4);
        TK_CHECK_EQ(rc, TK_TREAD_CORRUPT);
        TK_CHECK_EQ(r.off, ends[4]);
        TK_REQUIRE(tk_tread_resync(&r) == 1);
        TK_CHECK_EQ(r.off, ends[5]);
        while (tk_tread_next(&r, &type, &q, &len) == TK_TREAD_CHUNK)
            n++;
        TK_CHECK_EQ(n, 9);
        tk_tread_close(&r);
        b ^= 0x5a;
        TK_REQUIRE(pwrite(fd, &b, 1, (off_t)at) == 1);
        close(fd);
    }
    remove_dir(dir);
}

/* A wrap set: files base.0 .. base.N-1 reused in turn, the newest kept. */
TK_TEST(tfile_wrap_set_rotates)
{
    char dir[64], base[128], name[160];
    temp_dir(dir, sizeof dir);
    snprintf(base, sizeof base, "%s/w", dir);
    tk_tfile f;
    unsigned char p[400];
    TK_REQUIRE(tk_tfile_open(&f, base, 1000, 3, 0, TK_TFILE_MODE) == 0);
    unsigned chunks = 0;
    for (unsigned i = 0; i < 40; i++) {
        size_t n = payload(i, p);
        if (tk_tfile_room(&f) < TK_CHUNK_HEAD + n) {
            TK_REQUIRE(tk_tfile_rotate(&f) == 0);
            chunks = 0;
        }
        /* Each file's chunks count from 0 in the file. */
        memcpy(p, &chunks, 4);
        TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, n) == 0);
        chunks++;
    }
    TK_CHECK(f.seq >= 5);
    TK_CHECK(f.in_file <= 1000);
    uint64_t seq = f.seq;
    tk_tfile_close(&f);
    for (unsigned k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s.%u", base, k);
        TK_CHECK(access(name, R_OK) == 0);
    }
    snprintf(name, sizeof name, "%s.3", base);
    TK_CHECK(access(name, F_OK) != 0);
    snprintf(name, sizeof name, "%s.%u", base, (unsigned)(seq % 3));
    tk_tread r;
    unsigned type;
    const unsigned char *q;
    size_t len;
    TK_REQUIRE(tk_tread_open(&r, name) == 0);
    TK_REQUIRE(tk_tread_next(&r, &type, &q, &len) == TK_TREAD_CHUNK);
    tk_tread_close(&r);
    remove_dir(dir);
}

/* The size limit refuses a chunk that would pass it; a file that cannot be
 * created says why; a full device counts its write errors. */
TK_TEST(tfile_limits_and_errors)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t", dir);
    tk_tfile f;
    unsigned char p[400] = {0};
    TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 100, TK_TFILE_MODE) == 0);
    TK_CHECK_EQ(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, 50), 0);
    TK_CHECK_EQ(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, 50), 1);
    TK_CHECK_EQ(f.total, TK_TFILE_MAGIC_LEN + TK_CHUNK_HEAD + 50);
    tk_tfile_close(&f);
    snprintf(path, sizeof path, "%s/no/such/dir/t", dir);
    errno = 0;
    TK_CHECK_EQ(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE), -1);
    TK_CHECK_EQ(errno, ENOENT);
    if (access("/dev/full", W_OK) == 0) {
        TK_CHECK_EQ(tk_tfile_open(&f, "/dev/full", 0, 0, 0, TK_TFILE_MODE), -1);
        TK_CHECK_EQ(errno, ENOSPC);
    }
    remove_dir(dir);
}

/* A write that stops part way (here at the file size limit, as a full
 * disk stops one) leaves nothing of its chunk: the file ends at the last
 * whole chunk, and once there is room again the chunks written after
 * follow it; the file reads to its end. (The partial chunk stayed, and
 * every chunk after it was unreadable.) */
TK_TEST(tfile_failed_write_is_taken_back)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t", dir);
    sigset_t xfsz, saved;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    TK_REQUIRE(pthread_sigmask(SIG_BLOCK, &xfsz, &saved) == 0);
    struct rlimit old;
    TK_REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    tk_tfile f;
    unsigned char p[400];
    TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE) == 0);
    unsigned i = 0;
    for (; i < 5; i++)
        TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)) == 0);
    /* Room for part of the next chunk only. */
    struct rlimit low = {f.total + 100, old.rlim_max};
    TK_REQUIRE(setrlimit(RLIMIT_FSIZE, &low) == 0);
    uint64_t whole = f.total;
    for (int k = 0; k < 3; k++) {
        TK_CHECK_EQ(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)), -1);
        TK_CHECK_EQ(f.last_errno, EFBIG);
        TK_CHECK_EQ(f.total, whole);
        struct stat st;
        TK_REQUIRE(stat(path, &st) == 0);
        TK_CHECK_EQ((uint64_t)st.st_size, whole);
    }
    TK_CHECK_EQ(f.write_errors, 3);
    TK_REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    for (; i < 20; i++)
        TK_REQUIRE(tk_tfile_chunk(&f, TK_CHUNK_EVENTS, p, payload(i, p)) == 0);
    tk_tfile_close(&f);
    int last;
    TK_CHECK_EQ(read_all(path, &last), 20);
    TK_CHECK_EQ(last, TK_TREAD_EOF);
    /* A raised SIGXFSZ is pending for this thread: taken, then the mask
     * goes back. */
    struct timespec now = {0, 0};
    while (sigtimedwait(&xfsz, NULL, &now) == SIGXFSZ)
        ;
    TK_REQUIRE(pthread_sigmask(SIG_SETMASK, &saved, NULL) == 0);
    remove_dir(dir);
}

/* Not a trace file, or no file at all. */
TK_TEST(tfile_reader_refuses_other_files)
{
    tk_tread r;
    TK_CHECK_EQ(tk_tread_open(&r, "/no/such/file"), -1);
    TK_CHECK_EQ(tk_tread_open(&r, "/etc/hostname"), -2);
}

/* A file cut before its magic was whole (a writer killed as it made the
 * file, or its first write taken back): shorter than the magic, what it
 * holds the magic's beginning. The readers say it is cut (-3: damaged
 * from its start), not that it is no trace file; the writer takes it for
 * its own (it was one), so a new trace at its name replaces it. A file
 * as short whose bytes differ, or one of 8 bytes that are not the magic,
 * is no trace file, and is left alone. */
TK_TEST(tfile_cut_before_magic)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t", dir);
    tk_tread r;
    for (size_t n = 0; n < TK_TFILE_MAGIC_LEN; n++) {
        FILE *fp = fopen(path, "wb");
        TK_REQUIRE(fp != NULL && fwrite(TK_TFILE_MAGIC, 1, n, fp) == n && fclose(fp) == 0);
        TK_CHECK_EQ(tk_tread_open(&r, path), -3);
        TK_CHECK(tk_tfile_is_ours(AT_FDCWD, path));
    }
    tk_tfile f;
    TK_REQUIRE(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE) == 0);
    tk_tfile_close(&f);
    TK_REQUIRE(tk_tread_open(&r, path) == 0);
    tk_tread_close(&r);
    /* Version 1 is a trace file too (its readers read it). */
    FILE *fp1 = fopen(path, "wb");
    TK_REQUIRE(fp1 != NULL && fputs("TKTRACE1", fp1) >= 0 && fclose(fp1) == 0);
    TK_CHECK(tk_tfile_is_ours(AT_FDCWD, path));
    TK_REQUIRE(tk_tread_open(&r, path) == 0);
    TK_CHECK_EQ(r.version, 1);
    tk_tread_close(&r);
    static const char *const others[] = {"TKTX", "x", "TKTRACE3", "TKTRACE0"};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        FILE *fp = fopen(path, "wb");
        TK_REQUIRE(fp != NULL && fputs(others[k], fp) >= 0 && fclose(fp) == 0);
        TK_CHECK_EQ(tk_tread_open(&r, path), -2);
        TK_CHECK(!tk_tfile_is_ours(AT_FDCWD, path));
        errno = 0;
        TK_CHECK_EQ(tk_tfile_open(&f, path, 0, 0, 0, TK_TFILE_MODE), -1);
        TK_CHECK_EQ(errno, EEXIST);
    }
    remove_dir(dir);
}

/* Events, dictionary and lost payloads built and read back. */
TK_TEST(tfile_payloads_round_trip)
{
    tk_bytes b = {0};
    tk_events_start(&b);
    for (unsigned i = 0; i < 100; i++) {
        /* Room for more than the record takes, then shortened. */
        unsigned char *at = tk_events_add(&b, 1000 + i, i % 17 + 5);
        TK_REQUIRE(at != NULL);
        memset(at, (int)i, i % 17);
        tk_events_shrink(&b, at, i % 17 + 5, i % 17);
    }
    tk_events_finish(&b, (tk_anchor){2000, 5000000}, 100);
    tk_events_iter it;
    TK_REQUIRE(tk_events_begin(&it, b.p, b.len) == 0);
    TK_CHECK_EQ(it.anchor.stamp, 2000);
    TK_CHECK_EQ(it.anchor.system, 5000000);
    uint64_t stamp;
    const unsigned char *rec;
    size_t len;
    for (unsigned i = 0; i < 100; i++) {
        TK_REQUIRE(tk_events_next(&it, &stamp, &rec, &len) == 1);
        TK_CHECK_EQ(stamp, 1000 + i);
        TK_CHECK_EQ(len, i % 17);
        TK_CHECK(len == 0 || rec[len - 1] == (unsigned char)i);
    }
    TK_CHECK_EQ(tk_events_next(&it, &stamp, &rec, &len), 0);
    /* A count beyond the records is malformed. */
    TK_REQUIRE(tk_events_begin(&it, b.p, b.len - 1) == 0);
    int rc = 1;
    while (rc == 1)
        rc = tk_events_next(&it, &stamp, &rec, &len);
    TK_CHECK_EQ(rc, -1);

    tk_dict_start(&b, 7);
    TK_REQUIRE(tk_dict_add(&b, "abc", 3) == 0);
    TK_REQUIRE(tk_dict_add(&b, "", 0) == 0);
    tk_dict_finish(&b, 2);
    tk_dict_iter d;
    TK_REQUIRE(tk_dict_begin(&d, b.p, b.len) == 0);
    TK_CHECK_EQ(d.first, 7);
    TK_REQUIRE(tk_dict_next(&d, &rec, &len) == 1);
    TK_CHECK(len == 3 && memcmp(rec, "abc", 3) == 0);
    TK_REQUIRE(tk_dict_next(&d, &rec, &len) == 1);
    TK_CHECK_EQ(len, 0);
    TK_CHECK_EQ(tk_dict_next(&d, &rec, &len), 0);
    tk_bytes_free(&b);

    unsigned char lost[16];
    uint64_t count;
    tk_lost_make(lost, 42, 99);
    TK_REQUIRE(tk_lost_read(lost, 16, &count, &stamp) == 0);
    TK_CHECK_EQ(count, 42);
    TK_CHECK_EQ(stamp, 99);
    TK_CHECK_EQ(tk_lost_read(lost, 15, &count, &stamp), -1);
}

/* Stamps become time on one line per machine: the reference anchor's
 * time, plus ticks at the machine's rate, before it as well as after. */
TK_TEST(tfile_stamp_time)
{
    tk_anchor ref = {1000, 1000000000};
    TK_CHECK_EQ(tk_stamp_time(ref, 2000000000u, 1000), 1000000000);
    TK_CHECK_EQ(tk_stamp_time(ref, 2000000000u, 3000), 1000001000);
    TK_CHECK_EQ(tk_stamp_time(ref, 2000000000u, 0), 999999500);
    TK_CHECK_EQ(tk_stamp_time(ref, 1000000000u, 1010), 1000000010);
}
