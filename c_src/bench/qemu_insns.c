/* qemu_insns.c: a plugin for qemu-user (TCG plugin API version 1) that
 * counts the guest instructions executed in the code of one shared
 * object, or in all code, each guest thread into its own counter. It gives `make bench` instruction counts of the
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
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
typedef void (*vcpu_udata_cb)(unsigned int, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *,
                                          vcpu_udata_cb,
                                          enum qemu_plugin_cb_flags, void *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

#define MAX_RANGES 16
#define MAX_VCPUS 1024 /* guest threads: the VM has a few dozen */

static char want[256];
static int all;
static uint64_t lo[MAX_RANGES], hi[MAX_RANGES];
static int ranges;
/* Per guest thread (qemu-user runs them in parallel): each adds only to
 * its own. Threads past MAX_VCPUS are counted apart, as lost. */
static uint64_t count[MAX_VCPUS];
static uint64_t beyond;

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

static void ran(unsigned int vcpu, void *insns)
{
    if (vcpu < MAX_VCPUS)
        count[vcpu] += (uintptr_t)insns;
    else
        __atomic_fetch_add(&beyond, 1, __ATOMIC_RELAXED);
}

/* Each block is translated once: a block in the wanted code adds its
 * instructions to its thread's count each time it runs. */
static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    if (wanted(qemu_plugin_tb_vaddr(tb)))
        qemu_plugin_register_vcpu_tb_exec_cb(
            tb, ran, QEMU_PLUGIN_CB_NO_REGS,
            (void *)(uintptr_t)qemu_plugin_tb_n_insns(tb));
}

static void at_exit(qemu_plugin_id_t id, void *unused)
{
    (void)id;
    (void)unused;
    uint64_t all = 0;
    for (int i = 0; i < MAX_VCPUS; i++)
        all += count[i];
    if (beyond == 0)
        fprintf(stderr, "insns %s %llu\n", want, (unsigned long long)all);
    else
        fprintf(stderr, "insns %s: blocks of %llu runs on threads past %d not counted\n",
                want, (unsigned long long)beyond, MAX_VCPUS);
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
