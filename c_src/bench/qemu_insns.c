/* qemu_insns.c: a plugin for qemu-user (TCG plugin API version 1) that
 * counts the guest instructions executed in the code of one shared
 * object, or in all code. It gives `make bench` instruction counts of the
 * tracer inside a running VM, where valgrind cannot go (the JIT stops on
 * its own assertions under valgrind; under qemu-user with +JMsingle true
 * it runs).
 *
 * Arguments: lib=NAME counts translation blocks that start in a mapping
 * whose line in /proc/self/maps contains NAME (qemu-user maps the guest at
 * the host's addresses on x86-64); lib=ALL counts every block. At exit it
 * prints "insns NAME COUNT" on stderr.
 *
 * The plugin API is declared here, the few functions it uses, as qemu's
 * qemu-plugin.h of API version 1 gives them. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *,
                                              enum qemu_plugin_op, void *,
                                              uint64_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

#define MAX_RANGES 16

static char want[256];
static int all;
static uint64_t lo[MAX_RANGES], hi[MAX_RANGES];
static int ranges;
/* Added to by the translated code itself (an inline add per block). */
static uint64_t count;

/* The mappings of the shared object, once it is loaded. */
static void scan(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    if (f == NULL)
        return;
    ranges = 0;
    while (ranges < MAX_RANGES && fgets(line, sizeof line, f) != NULL) {
        unsigned long a, b;
        if (strstr(line, want) != NULL && sscanf(line, "%lx-%lx", &a, &b) == 2) {
            lo[ranges] = a;
            hi[ranges] = b;
            ranges++;
        }
    }
    fclose(f);
}

static int wanted(uint64_t v)
{
    if (all)
        return 1;
    if (ranges == 0)
        scan();
    for (int i = 0; i < ranges; i++)
        if (v >= lo[i] && v < hi[i])
            return 1;
    return 0;
}

/* Each block is translated once: a block in the wanted code adds its
 * instructions to the count each time it runs. */
static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    if (wanted(qemu_plugin_tb_vaddr(tb)))
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                                 &count,
                                                 qemu_plugin_tb_n_insns(tb));
}

static void at_exit(qemu_plugin_id_t id, void *unused)
{
    (void)id;
    (void)unused;
    fprintf(stderr, "insns %s %llu\n", want, (unsigned long long)count);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                               const struct qemu_info_t *info, int argc,
                               char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], "lib=", 4) == 0)
            snprintf(want, sizeof want, "%s", argv[i] + 4);
    if (want[0] == '\0')
        return -1;
    all = strcmp(want, "ALL") == 0;
    qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
