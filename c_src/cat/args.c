/* args.c: the command line of tracekit-cat. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cat.h"

void args_usage(FILE *to)
{
    fputs("usage: tracekit-cat [options] FILE|WRAPSET...\n"
          "  Reads tracekit trace files (several: merged by time) and writes their events.\n"
          "  --format F        text (default): one event a line; dbg: dbg's trace port file\n"
          "                    format, for dbg:trace_client(file, F)\n"
          "  -o, --output PATH write there instead of standard output\n"
          "  --pid P           only events of process P as the text prints it (<0.84.0>), or\n"
          "                    of the process that registered the name P in the trace\n"
          "  --tag T[,T...]    only events with these tags (send, call, seq_trace, ...)\n"
          "  --since TIME      only events at or after TIME\n"
          "  --until TIME      only events at or before TIME\n"
          "                    TIME: seconds since the epoch (1795384332.815), or\n"
          "                    YYYY-MM-DDTHH:MM:SS[.frac][Z|+HH:MM] (local time without a zone)\n"
          "  --node N          only events recorded on node N\n"
          "  --depth N         text: terms nested deeper than N print as ... (default 20)\n"
          "  --line-length N   text: lines cut at N characters, ending in ... (default 240)\n"
          "  --help\n"
          "Filters of one kind may be given more than once (any of them); kinds combine.\n"
          "A line of text: TIME [NODE] PROCESS TAG WHAT, TIME in UTC (the time the files are\n"
          "merged by), NODE when the files are of several nodes; a line \"-- N events lost\"\n"
          "where the writer could not keep events.\n"
          "Chrome trace, JSON Lines, folded stacks and the HTML report are written by\n"
          "tracekit_export and tracekit_report, from the same files:\n"
          "  erl -noshell -pa TRACEKIT/ebin -eval \\\n"
          "    'tracekit_export:chrome(\"calls.tkt\", \"calls.trace.json\"), halt().'\n"
          "Exit status: 0 done, 1 a damaged or cut file (the events before the damage are\n"
          "written), 2 bad arguments, 3 a file missing or unreadable, 4 not a trace file,\n"
          "5 the output could not be written.\n",
          to);
}

static bool bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "tracekit-cat: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    args_usage(stderr);
    return false;
}

static bool positive(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *s == 0 || *end || v < 1 || v > 1000000000)
        return false;
    *out = (int)v;
    return true;
}

/* Digits of a fraction of a second into nanoseconds. */
static bool fraction(const char **p, int64_t *ns)
{
    int64_t v = 0, scale = 100000000;
    if (**p != '.')
        return true;
    (*p)++;
    if (**p < '0' || **p > '9')
        return false;
    for (; **p >= '0' && **p <= '9'; (*p)++) {
        v += (**p - '0') * scale;
        scale /= 10;
    }
    *ns = v;
    return true;
}

/* Seconds and nanoseconds as nanoseconds, when they fit (years 1678 to
 * 2261). */
static bool to_ns(long long sec, int64_t ns, int64_t *out)
{
    const long long max = INT64_MAX / 1000000000LL - 1;
    if (sec > max || sec < -max)
        return false;
    *out = (int64_t)sec * 1000000000LL + ns;
    return true;
}

/* A time: seconds since the epoch, or an ISO 8601 date and time. */
static bool parse_time(const char *s, int64_t *out)
{
    const char *p = s;
    int64_t frac = 0;
    if (strchr(s, '-') == NULL || (s[0] == '-' && strchr(s + 1, '-') == NULL)) {
        char *end;
        errno = 0;
        long long sec = strtoll(p, &end, 10);
        p = end;
        if (errno || end == s || !fraction(&p, &frac) || *p)
            return false;
        return to_ns(sec, s[0] == '-' ? -frac : frac, out);
    }
    struct tm tm = {0};
    int n = 0;
    if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return false;
    p += n;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    if (!fraction(&p, &frac))
        return false;
    time_t t;
    if (*p == 0) {
        tm.tm_isdst = -1;
        t = mktime(&tm);
    } else {
        int sign = 0, hh = 0, mm = 0;
        if (*p == 'Z' && p[1] == 0) {
            sign = 0;
        } else if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &hh, &mm) == 2 &&
                   strlen(p) == 6) {
            sign = *p == '+' ? 1 : -1;
        } else {
            return false;
        }
        t = timegm(&tm) - sign * (hh * 3600 + mm * 60);
    }
    return to_ns((long long)t, frac, out);
}

/* --format: text or dbg; the exports are the Erlang side's. */
static bool format(const char *v, cat_format *out)
{
    static const char *const exports[][2] = {{"chrome", "tracekit_export:chrome/2"},
                                             {"jsonl", "tracekit_export:jsonl/2"},
                                             {"folded", "tracekit_export:folded/2"},
                                             {"html", "tracekit_report:write/2"}};
    if (strcmp(v, "text") == 0 || strcmp(v, "dbg") == 0) {
        *out = v[0] == 't' ? FMT_TEXT : FMT_DBG;
        return true;
    }
    for (size_t k = 0; k < sizeof exports / sizeof *exports; k++)
        if (strcmp(v, exports[k][0]) == 0) {
            char why[128];
            snprintf(why, sizeof why, "--format %s: it is written by %s (see below)", v,
                     exports[k][1]);
            return bad("%s", why);
        }
    return bad("unknown format %s (text, dbg)", v);
}

/* Appends the comma-separated items of s to a list. */
static void add_list(const char ***list, size_t *n, const char *s)
{
    const char *start = s;
    for (const char *c = s;; c++)
        if (*c == ',' || *c == 0) {
            if (c > start) {
                *list = xrealloc((void *)*list, (*n + 1) * sizeof **list);
                (*list)[(*n)++] = xstrndup(start, (size_t)(c - start));
            }
            if (*c == 0)
                break;
            start = c + 1;
        }
}

static void add_one(const char ***list, size_t *n, const char *s)
{
    *list = xrealloc((void *)*list, (*n + 1) * sizeof **list);
    (*list)[(*n)++] = s;
}

void args_free(cat_args *a)
{
    for (size_t k = 0; k < a->ntags; k++)
        free((void *)a->tags[k]);
    free((void *)a->tags);
    free((void *)a->pids);
    free((void *)a->nodes);
    free((void *)a->sources);
    memset(a, 0, sizeof *a);
}

bool args_parse(int argc, char **argv, cat_args *a)
{
    memset(a, 0, sizeof *a);
    a->depth = 20;
    a->line_length = 240;
    bool options = true;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!options || o[0] != '-' || o[1] == 0) {
            add_one(&a->sources, &a->nsources, o);
            continue;
        }
        if (strcmp(o, "--") == 0) {
            options = false;
            continue;
        }
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            args_usage(stdout);
            exit(0);
        }
        /* --opt=value or --opt value */
        const char *eq = strchr(o, '=');
        char name[64];
        size_t nl = eq ? (size_t)(eq - o) : strlen(o);
        if (nl >= sizeof name)
            return bad("unknown option %s", o);
        memcpy(name, o, nl);
        name[nl] = 0;
        const char *v = eq ? eq + 1 : NULL;
        static const char *const takes[] = {"--format", "--output", "-o", "--pid",
                                            "--tag", "--since", "--until", "--node",
                                            "--depth", "--line-length"};
        bool known = false;
        for (size_t k = 0; k < sizeof takes / sizeof *takes; k++)
            known |= strcmp(name, takes[k]) == 0;
        if (!known)
            return bad("unknown option %s", o);
        if (v == NULL) {
            if (i + 1 >= argc)
                return bad("%s needs a value", name);
            v = argv[++i];
        }
        if (strcmp(name, "--format") == 0) {
            if (!format(v, &a->format))
                return false;
        } else if (strcmp(name, "--output") == 0 || strcmp(name, "-o") == 0) {
            a->output = v;
        } else if (strcmp(name, "--pid") == 0) {
            add_one(&a->pids, &a->npids, v);
        } else if (strcmp(name, "--tag") == 0) {
            add_list(&a->tags, &a->ntags, v);
        } else if (strcmp(name, "--node") == 0) {
            add_one(&a->nodes, &a->nnodes, v);
        } else if (strcmp(name, "--since") == 0) {
            if (!parse_time(v, &a->since))
                return bad("--since: not a time: %s", v);
            a->has_since = true;
        } else if (strcmp(name, "--until") == 0) {
            if (!parse_time(v, &a->until))
                return bad("--until: not a time: %s", v);
            a->has_until = true;
        } else if (strcmp(name, "--depth") == 0) {
            if (!positive(v, &a->depth))
                return bad("--depth: not a positive integer: %s", v);
        } else if (strcmp(name, "--line-length") == 0) {
            if (!positive(v, &a->line_length))
                return bad("--line-length: not a positive integer: %s", v);
        }
    }
    if (a->nsources == 0)
        return bad("%s", "no trace file given");
    return true;
}
