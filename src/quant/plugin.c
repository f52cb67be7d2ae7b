/* src/quant/plugin.c: rounding plugins (src/quant/quant.h, "rounding plugins"): the registry,
 * loading and checking a shared object, and the serial kernel the OpenMP row driver runs.
 *
 * The vector variants follow the x86-64 Vector Function ABI that gcc uses for
 * `#pragma omp declare simd`: _ZGV<isa>N<lanes>vv_NAME takes the lanes of x and of the random
 * bits in one vector register each and returns the lanes of y. We call the unmasked variants for
 * SSE2 (b, 4 lanes), AVX2 (d, 8) and AVX-512 (e, 16) from functions compiled for that ISA, so the
 * vectors travel in xmm, ymm or zmm registers as the ABI says; the tail of a piece and every CPU
 * without a usable variant go through the scalar function.
 *
 * Before dlopen maps a file, its ELF header and program headers are read and checked (a shared
 * object of this machine's kind whose segments lie inside the file: a file cut short otherwise
 * kills the process inside the loader); after it, every symbol the host will call must be a
 * function (calling a data object crashes).
 */
#define _GNU_SOURCE /* dladdr1, dl_iterate_phdr */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/quant/quant.h"
#include "src/quant/quant_cpu.h"
#include "src/base/rng.h"

typedef float (*plugin_scalar_fn)(float, uint32_t);
typedef int (*plugin_bits_fn)(void);

/* Random bits of every element when the rounding is nearest: u = 1/2. */
#define PLUGIN_NEAREST_BITS 0x80000000u
/* Elements of the load-time test vector (a multiple of every variant's lanes). */
#define PLUGIN_CHECK_N 512

#if defined(__x86_64__) && defined(__GNUC__)
#define PLUGIN_X86 1
typedef float pv4f __attribute__((vector_size(16)));
typedef uint32_t pv4u __attribute__((vector_size(16)));
typedef float pv8f __attribute__((vector_size(32)));
typedef uint32_t pv8u __attribute__((vector_size(32)));
typedef float pv16f __attribute__((vector_size(64)));
typedef uint32_t pv16u __attribute__((vector_size(64)));
typedef pv4f (*plugin_v4_fn)(pv4f, pv4u);
typedef pv8f (*plugin_v8_fn)(pv8f, pv8u);
typedef pv16f (*plugin_v16_fn)(pv16f, pv16u);
#else
#define PLUGIN_X86 0
#endif

/* The vector variants, narrowest first. */
enum { PLUGIN_V4 = 0, PLUGIN_V8, PLUGIN_V16, PLUGIN_NVARIANTS };
static const struct {
    const char *prefix;
    int lanes;
} plugin_variants[PLUGIN_NVARIANTS] = {
    {"_ZGVbN4vv_", 4}, {"_ZGVdN8vv_", 8}, {"_ZGVeN16vv_", 16}};

struct plugin {
    char text[QUANT_PLUGIN_TEXT_MAX + 1]; /* as loaded: PATH or PATH:NAME */
    char path[QUANT_PLUGIN_TEXT_MAX + 1];
    char symbol[QUANT_PLUGIN_TEXT_MAX + 1];
    char kernel[QUANT_PLUGIN_TEXT_MAX + 16]; /* the symbol that runs whole vectors */
    plugin_scalar_fn scalar;
    void *vec;   /* widest vector variant that agrees; NULL: scalar only */
    int variant; /* its PLUGIN_V*, or -1 */
    int bits;
};

static struct plugin plugins[QUANT_PLUGIN_MAX];
static int nplugins; /* entries below it are complete and never change (acquire/release) */
static pthread_mutex_t plugins_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct plugin *plugin_get(int id)
{
    int n = __atomic_load_n(&nplugins, __ATOMIC_ACQUIRE);
    return id >= 0 && id < n ? &plugins[id] : NULL;
}

int quant_plugin_valid(int id) { return plugin_get(id) != NULL; }

const char *quant_plugin_text(int id)
{
    const struct plugin *e = plugin_get(id);
    return e ? e->text : "";
}

int quant_plugin_bits(int id)
{
    const struct plugin *e = plugin_get(id);
    return e ? e->bits : 32;
}

const char *quant_plugin_kernel(int id, int *lanes)
{
    const struct plugin *e = plugin_get(id);
    if (lanes) *lanes = e && e->variant >= 0 ? plugin_variants[e->variant].lanes : 1;
    return e ? e->kernel : "";
}

static inline uint32_t plugin_sat(float y)
{
    return (quant_f2u(y) & 0x7fffffffu) == 0x7f800000u;
}

float quant_plugin_round(int id, float v, uint32_t r, uint32_t *sat)
{
    const struct plugin *e = plugin_get(id);
    ADAPT_ASSERT(e != NULL);
    float y = e->scalar(v, r);
    *sat = plugin_sat(y);
    return y;
}

/* ---- calling the variants ---- */

static int cpu_runs(int variant)
{
#if PLUGIN_X86
    switch (variant) {
    case PLUGIN_V4: return 1; /* SSE2 is part of x86-64 */
    case PLUGIN_V8: return __builtin_cpu_supports("avx2");
    case PLUGIN_V16: return __builtin_cpu_supports("avx512f");
    default: return 0;
    }
#else
    (void)variant;
    return 0;
#endif
}

/* y[0..n) = f(x, r) in whole vectors of the variant's lanes, the rest through the scalar
 * function. x == y is allowed. */
#if PLUGIN_X86
static void apply_v4(void *fn, plugin_scalar_fn sc, const float *x, const uint32_t *r, float *y,
                     size_t n)
{
    plugin_v4_fn f = (plugin_v4_fn)fn;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        pv4f xv, yv;
        pv4u rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, r + j, sizeof rv);
        yv = f(xv, rv);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++) y[j] = sc(x[j], r[j]);
}

__attribute__((target("avx2"))) static void apply_v8(void *fn, plugin_scalar_fn sc,
                                                     const float *x, const uint32_t *r, float *y,
                                                     size_t n)
{
    plugin_v8_fn f = (plugin_v8_fn)fn;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        pv8f xv, yv;
        pv8u rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, r + j, sizeof rv);
        yv = f(xv, rv);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++) y[j] = sc(x[j], r[j]);
}

__attribute__((target("avx512f"))) static void apply_v16(void *fn, plugin_scalar_fn sc,
                                                         const float *x, const uint32_t *r,
                                                         float *y, size_t n)
{
    plugin_v16_fn f = (plugin_v16_fn)fn;
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        pv16f xv, yv;
        pv16u rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, r + j, sizeof rv);
        yv = f(xv, rv);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++) y[j] = sc(x[j], r[j]);
}
#endif

static void apply(int variant, void *fn, plugin_scalar_fn sc, const float *x, const uint32_t *r,
                  float *y, size_t n)
{
#if PLUGIN_X86
    switch (variant) {
    case PLUGIN_V4: apply_v4(fn, sc, x, r, y, n); return;
    case PLUGIN_V8: apply_v8(fn, sc, x, r, y, n); return;
    case PLUGIN_V16: apply_v16(fn, sc, x, r, y, n); return;
    default: break;
    }
#else
    (void)variant, (void)fn;
#endif
    for (size_t j = 0; j < n; j++) y[j] = sc(x[j], r[j]);
}

/* ---- checking the file and its symbols ---- */

/* This machine's kind of shared object, decided at compile time. */
#if __ELF_NATIVE_CLASS == 64
#define PLUGIN_ELFCLASS ELFCLASS64
#define PLUGIN_ST_TYPE(info) ELF64_ST_TYPE(info)
#else
#define PLUGIN_ELFCLASS ELFCLASS32
#define PLUGIN_ST_TYPE(info) ELF32_ST_TYPE(info)
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PLUGIN_ELFDATA ELFDATA2LSB
#else
#define PLUGIN_ELFDATA ELFDATA2MSB
#endif
#if defined(__x86_64__)
#define PLUGIN_EM EM_X86_64
#elif defined(__aarch64__)
#define PLUGIN_EM EM_AARCH64
#elif defined(__i386__)
#define PLUGIN_EM EM_386
#elif defined(__arm__)
#define PLUGIN_EM EM_ARM
#elif defined(__powerpc64__)
#define PLUGIN_EM EM_PPC64
#elif defined(__powerpc__)
#define PLUGIN_EM EM_PPC
#elif defined(__riscv)
#define PLUGIN_EM EM_RISCV
#elif defined(__s390__)
#define PLUGIN_EM EM_S390
#elif defined(__mips__)
#define PLUGIN_EM EM_MIPS
#elif defined(__loongarch__)
#define PLUGIN_EM EM_LOONGARCH
#else
#error "src/quant/plugin.c: add this machine's ELF e_machine value (EM_* of <elf.h>)"
#endif

static const char *machine_name(unsigned m)
{
    switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_386: return "i386";
    case EM_ARM: return "32-bit ARM";
    case EM_PPC64: return "PowerPC 64";
    case EM_PPC: return "PowerPC";
    case EM_RISCV: return "RISC-V";
    case EM_S390: return "s390";
    case EM_MIPS: return "MIPS";
    default: return "another machine";
    }
}

static const char *type_name(unsigned t)
{
    switch (t) {
    case ET_NONE: return "of no type";
    case ET_REL: return "a relocatable object (.o)";
    case ET_EXEC: return "an executable";
    case ET_CORE: return "a core file";
    default: return "of an unknown type";
    }
}

/* 1 when bytes [off, off + len) lie inside a file of size bytes (no overflow). */
static int inside(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* The ELF header and program headers of the open file fd (size bytes) against this machine's
 * shared objects, and every segment and the section header table inside the file. path names it
 * in messages. */
static enum adapt_status check_elf_fd(const char *path, int fd, uint64_t size)
{
    ElfW(Ehdr) h;
    if (size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: not an ELF file (%llu bytes, shorter than an ELF "
                           "header)",
                           path, (unsigned long long)size);
    if (memcmp(h.e_ident, ELFMAG, SELFMAG))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: not an ELF file (it does not start with the ELF "
                           "magic number); expected a shared object built with -shared -fPIC",
                           path);
    if (h.e_ident[EI_CLASS] != PLUGIN_ELFCLASS)
        return ADAPT_ERROR(ADAPT_EFORMAT, "quant plugin %s: a %s ELF file; this program is %s",
                           path, h.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "64-bit",
                           PLUGIN_ELFCLASS == ELFCLASS32 ? "32-bit" : "64-bit");
    if (h.e_ident[EI_DATA] != PLUGIN_ELFDATA)
        return ADAPT_ERROR(ADAPT_EFORMAT, "quant plugin %s: ELF byte order %d; this program is %s",
                           path, h.e_ident[EI_DATA],
                           PLUGIN_ELFDATA == ELFDATA2LSB ? "little-endian" : "big-endian");
    if (h.e_ident[EI_VERSION] != EV_CURRENT || h.e_version != EV_CURRENT)
        return ADAPT_ERROR(ADAPT_EFORMAT, "quant plugin %s: ELF version %u, expected %d", path,
                           (unsigned)h.e_version, EV_CURRENT);
    if (h.e_type != ET_DYN)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: %s (ELF type %u), not a shared object; build it with "
                           "-shared -fPIC",
                           path, type_name(h.e_type), (unsigned)h.e_type);
    if (h.e_machine != PLUGIN_EM)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: built for machine %u (%s); this program runs on "
                           "machine %u (%s)",
                           path, (unsigned)h.e_machine, machine_name(h.e_machine),
                           (unsigned)PLUGIN_EM, machine_name(PLUGIN_EM));
    if (h.e_phnum == 0 || h.e_phnum == PN_XNUM || h.e_phentsize != sizeof(ElfW(Phdr)))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: %u program headers of %u bytes; expected 1 to %d "
                           "of %zu bytes",
                           path, (unsigned)h.e_phnum, (unsigned)h.e_phentsize, PN_XNUM - 1,
                           sizeof(ElfW(Phdr)));
    uint64_t phbytes = (uint64_t)h.e_phnum * sizeof(ElfW(Phdr));
    if (!inside(h.e_phoff, phbytes, size))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: its program headers (bytes %llu to %llu) lie past "
                           "the end of the file (%llu bytes): is the file cut short?",
                           path, (unsigned long long)h.e_phoff,
                           (unsigned long long)h.e_phoff + phbytes, (unsigned long long)size);
    ElfW(Phdr) *ph = malloc((size_t)phbytes);
    if (!ph) return ADAPT_ERROR(ADAPT_ENOMEM, "quant plugin %s: out of memory", path);
    enum adapt_status st = ADAPT_OK;
    if (pread(fd, ph, (size_t)phbytes, (off_t)h.e_phoff) != (ssize_t)phbytes) {
        st = ADAPT_ERROR(ADAPT_EIO, "quant plugin %s: cannot read its program headers: %s", path,
                         strerror(errno));
        goto free_headers;
    }
    for (unsigned i = 0; i < h.e_phnum; i++) {
        if (!inside(ph[i].p_offset, ph[i].p_filesz, size)) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "quant plugin %s: segment %u (%s) holds bytes %llu to %llu, past "
                             "the end of the file (%llu bytes): is the file cut short?",
                             path, i, ph[i].p_type == PT_LOAD ? "PT_LOAD" : "not loaded",
                             (unsigned long long)ph[i].p_offset,
                             (unsigned long long)ph[i].p_offset + ph[i].p_filesz,
                             (unsigned long long)size);
            goto free_headers;
        }
        if (ph[i].p_type == PT_LOAD && ph[i].p_filesz > ph[i].p_memsz) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "quant plugin %s: segment %u (PT_LOAD) has %llu bytes in the file "
                             "and only %llu in memory",
                             path, i, (unsigned long long)ph[i].p_filesz,
                             (unsigned long long)ph[i].p_memsz);
            goto free_headers;
        }
    }
    if (h.e_shoff) {
        uint64_t n = h.e_shnum ? h.e_shnum : 1; /* 0: the count is in section 0 */
        if (h.e_shentsize != sizeof(ElfW(Shdr)))
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "quant plugin %s: section headers of %u bytes, expected %zu", path,
                             (unsigned)h.e_shentsize, sizeof(ElfW(Shdr)));
        else if (!inside(h.e_shoff, n * sizeof(ElfW(Shdr)), size))
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "quant plugin %s: its section headers (bytes %llu to %llu) lie "
                             "past the end of the file (%llu bytes): is the file cut short?",
                             path, (unsigned long long)h.e_shoff,
                             (unsigned long long)(h.e_shoff + n * sizeof(ElfW(Shdr))),
                             (unsigned long long)size);
    }
free_headers:
    free(ph);
    return st;
}

/* The file dlopen(path) maps: path itself when it names a folder; for a bare name the first
 * LD_LIBRARY_PATH folder that holds it (folders naming $ORIGIN and the like skipped). Writes ""
 * when the bare name is left to the system's library folders (ld.so.cache), which hold the
 * system's own libraries. */
static void file_of(const char *path, char *file, size_t cap)
{
    file[0] = '\0';
    if (strchr(path, '/')) {
        snprintf(file, cap, "%s", path);
        return;
    }
    const char *lp = getenv("LD_LIBRARY_PATH");
    while (lp && *lp) {
        size_t n = strcspn(lp, ":;");
        if (!memchr(lp, '$', n) &&
            (size_t)snprintf(file, cap, "%.*s%s%s", (int)n, lp, n ? "/" : "./", path) < cap &&
            access(file, F_OK) == 0)
            return;
        lp += n;
        if (*lp) lp++;
    }
    file[0] = '\0';
}

/* The file that dlopen(path) would map, checked as a shared object of this machine. */
static enum adapt_status check_elf(const char *path)
{
    char file[4096], who[4096 + QUANT_PLUGIN_TEXT_MAX + 32];
    file_of(path, file, sizeof file);
    if (!file[0]) return ADAPT_OK;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) /* dlopen says why, in its words */
        return ADAPT_OK;
    if (strcmp(file, path))
        snprintf(who, sizeof who, "%s (in LD_LIBRARY_PATH: %s)", path, file);
    else
        snprintf(who, sizeof who, "%s", path);
    struct stat sb;
    enum adapt_status st;
    if (fstat(fd, &sb) != 0)
        st = ADAPT_ERROR(ADAPT_EIO, "quant plugin %s: cannot stat it: %s", who, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = ADAPT_ERROR(ADAPT_EFORMAT, "quant plugin %s: not a regular file", who);
    else
        st = check_elf_fd(who, fd, (uint64_t)sb.st_size);
    close(fd);
    return st;
}

/* Whether an address lies in an executable segment of a loaded object (dl_iterate_phdr). */
struct exec_find {
    uintptr_t addr;
    int exec;
};

static int exec_segment(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    struct exec_find *f = ctx;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz) {
            f->exec = (ph->p_flags & PF_X) != 0;
            return 1;
        }
    }
    return 0;
}

/* The symbol `name` found at addr is a function the host may call: its ELF symbol is STT_FUNC or
 * STT_GNU_IFUNC. An address that no exported symbol covers is what an IFUNC resolver returns
 * (the implementation it chose); it must then lie in an executable segment. */
static enum adapt_status check_function(const char *path, const char *name, void *addr)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: %s lies in no loaded object (a thread-local "
                           "variable?), not a function",
                           path, name);
    if (sym) {
        int t = PLUGIN_ST_TYPE(sym->st_info);
        if (t == STT_FUNC || t == STT_GNU_IFUNC) return ADAPT_OK;
        if (t == STT_OBJECT || t == STT_COMMON || t == STT_TLS)
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "quant plugin %s: %s is a data object, not a function", path,
                               name);
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: %s is not a function (ELF symbol type %d; a "
                           "function has type STT_FUNC)",
                           path, name, t);
    }
    struct exec_find f = {(uintptr_t)addr, 0};
    if (!dl_iterate_phdr(exec_segment, &f) || !f.exec)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "quant plugin %s: %s is not a function (it lies outside the "
                           "executable code of the object)",
                           path, name);
    return ADAPT_OK;
}

/* ---- loading ---- */

/* The fixed test vector: special values and ties with chosen random bits, then random floats
 * (bit patterns, and values in [-8, 8)) with Philox random bits. NaNs are quiet ones. */
static void check_vector(float *x, uint32_t *r)
{
    static const float specials[] = {
        0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
        FLT_TRUE_MIN, -FLT_TRUE_MIN, 0x1.fffffcp-127f, 1.0f, -1.0f, 0.5f, 1.5f, -1.5f, 2.5f,
        -2.5f, 3.5f, 0x1.01p0f, -0x1.01p0f, 0x1.03p0f, 0x1.008p0f, 0x1.1p0f, 0x1.3p0f, 0x1.8p-3f,
        0x1.fffep127f, 0x1.ff8p15f, 65504.0f, 65520.0f, 448.0f, 464.0f, 57344.0f, 0x1p-14f,
        0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-133f, 0x1.00008p0f, 0x1.000002p0f, 3.0f, 6.0f,
        7.5f, 28.0f, -0.1f, 0.1f, 1e-30f, -1e30f};
    static const uint32_t bits[] = {0u, PLUGIN_NEAREST_BITS, 0xffffffffu, 0x7fffffffu,
                                    0x00010000u, 0x0000ffffu};
    const size_t ns = sizeof specials / sizeof specials[0], nb = sizeof bits / sizeof bits[0];
    size_t i = 0;
    for (size_t b = 0; b < nb; b++)
        for (size_t k = 0; k < ns; k++, i++) {
            x[i] = specials[k];
            r[i] = bits[b];
        }
    for (; i < PLUGIN_CHECK_N; i++) {
        uint32_t u = adapt_rng_u32_at(0x5eed, 1, i);
        if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) u |= 0x00400000u;
        x[i] = i % 2 ? quant_u2f(u) : (float)(int32_t)u * 0x1p-28f;
        r[i] = adapt_rng_u32_at(0x5eed, 2, i);
    }
}

/* Default NAME: the file name without its folder, up to its first dot. */
static int default_symbol(const char *path, char *sym, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strcspn(b, ".");
    if (n == 0 || n >= len) return -1;
    memcpy(sym, b, n);
    sym[n] = '\0';
    return 0;
}

static int is_identifier(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* Opens and checks one plugin into *e (under the lock). */
static enum adapt_status plugin_open(struct plugin *e)
{
    const char *path = e->path, *sym = e->symbol;
    enum adapt_status st = check_elf(path);
    if (st != ADAPT_OK) return st;
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return ADAPT_ERROR(ADAPT_EIO, "quant plugin %s: cannot load it: %s", path,
                           why ? why : "unknown error");
    }
    dlerror();
    void *f = dlsym(h, sym);
    if (!f) {
        const char *why = dlerror();
        st = ADAPT_ERROR(ADAPT_ENOENT, "quant plugin %s: no rounding function '%s': %s", path,
                         sym, why ? why : "symbol is NULL");
        goto close_handle;
    }
    if ((st = check_function(path, sym, f)) != ADAPT_OK) goto close_handle;
    e->scalar = (plugin_scalar_fn)f;
    char name[sizeof e->kernel];
    snprintf(name, sizeof name, "%s_bits", sym);
    void *fb = dlsym(h, name);
    e->bits = 32;
    if (fb) {
        if ((st = check_function(path, name, fb)) != ADAPT_OK) goto close_handle;
        e->bits = ((plugin_bits_fn)fb)();
        if (e->bits < 1 || e->bits > 32) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "quant plugin %s: %s() returns %d, not 1..32", path,
                             name, e->bits);
            goto close_handle;
        }
    }
    float x[PLUGIN_CHECK_N], want[PLUGIN_CHECK_N], got[PLUGIN_CHECK_N];
    uint32_t r[PLUGIN_CHECK_N];
    check_vector(x, r);
    for (size_t i = 0; i < PLUGIN_CHECK_N; i++) want[i] = e->scalar(x[i], r[i]);
    e->vec = NULL;
    e->variant = -1;
    snprintf(e->kernel, sizeof e->kernel, "%s", sym);
    for (int v = 0; v < PLUGIN_NVARIANTS; v++) {
        if (!cpu_runs(v)) continue;
        snprintf(name, sizeof name, "%s%s", plugin_variants[v].prefix, sym);
        dlerror();
        void *fv = dlsym(h, name);
        if (!fv) continue;
        if ((st = check_function(path, name, fv)) != ADAPT_OK) goto close_handle;
        apply(v, fv, e->scalar, x, r, got, PLUGIN_CHECK_N);
        for (size_t i = 0; i < PLUGIN_CHECK_N; i++)
            if (quant_f2u(got[i]) != quant_f2u(want[i])) {
                st = ADAPT_ERROR(ADAPT_EFORMAT,
                                 "quant plugin %s: vector variant %s disagrees with %s at test "
                                 "element %zu: %s(%a, 0x%08x) = %a (bits 0x%08x), the vector "
                                 "variant gives %a (bits 0x%08x)",
                                 path, name, sym, i, sym, (double)x[i], r[i], (double)want[i],
                                 quant_f2u(want[i]), (double)got[i], quant_f2u(got[i]));
                goto close_handle;
            }
        e->vec = fv; /* variants are narrowest first: the last that agrees is the widest */
        e->variant = v;
        snprintf(e->kernel, sizeof e->kernel, "%s", name);
    }
    return ADAPT_OK; /* the handle stays open for the life of the process */
close_handle:
    dlclose(h);
    return st;
}

/* PATH and NAME of text (path and sym hold QUANT_PLUGIN_TEXT_MAX + 1 bytes); with any_name, a
 * text without ":NAME" leaves sym "" instead of taking the default. */
static enum adapt_status split_text(const char *text, char *path, char *sym, int any_name)
{
    if (!text || !*text) return ADAPT_ERROR(ADAPT_EINVAL, "quant plugin: no file named");
    if (strlen(text) > QUANT_PLUGIN_TEXT_MAX)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant plugin '%.40s...': longer than %d characters",
                           text, QUANT_PLUGIN_TEXT_MAX);
    snprintf(path, QUANT_PLUGIN_TEXT_MAX + 1, "%s", text);
    sym[0] = '\0';
    const char *colon = strrchr(text, ':');
    if (colon && is_identifier(colon + 1)) {
        path[colon - text] = '\0';
        snprintf(sym, QUANT_PLUGIN_TEXT_MAX + 1, "%s", colon + 1);
    } else if (!any_name && (default_symbol(path, sym, QUANT_PLUGIN_TEXT_MAX + 1) ||
                             !is_identifier(sym))) {
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "quant plugin %s: no function name in the file name; write "
                           "plugin(PATH:NAME)",
                           text);
    }
    if (!path[0]) return ADAPT_ERROR(ADAPT_EINVAL, "quant plugin '%s': no file named", text);
    return ADAPT_OK;
}

enum adapt_status quant_plugin_split(const char *text, char *path, char *name)
{
    return split_text(text, path, name, 0);
}

/* 1 when plugin files a and b are the same file for dlopen: both bare names (searched for) and
 * equal, or both paths that realpath resolves to the same file (equal when unresolved). */
static int same_file(const char *a, const char *b)
{
    int bare_a = !strchr(a, '/'), bare_b = !strchr(b, '/');
    if (bare_a || bare_b) return bare_a && bare_b && !strcmp(a, b);
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb ? !strcmp(ra, rb) : !ra && !rb && !strcmp(a, b);
    free(ra);
    free(rb);
    return same;
}

int quant_plugin_allowed(const char *text, const char *const *allow, int n)
{
    char path[QUANT_PLUGIN_TEXT_MAX + 1], sym[QUANT_PLUGIN_TEXT_MAX + 1];
    char apath[QUANT_PLUGIN_TEXT_MAX + 1], asym[QUANT_PLUGIN_TEXT_MAX + 1];
    if (split_text(text, path, sym, 0) != ADAPT_OK) return 0;
    for (int i = 0; i < n; i++)
        if (allow[i] && split_text(allow[i], apath, asym, 1) == ADAPT_OK &&
            (!asym[0] || !strcmp(asym, sym)) && same_file(path, apath))
            return 1;
    int loaded = __atomic_load_n(&nplugins, __ATOMIC_ACQUIRE);
    for (int i = 0; i < loaded; i++)
        if (!strcmp(plugins[i].symbol, sym) && same_file(path, plugins[i].path)) return 1;
    return 0;
}

static int forbidden; /* quant_plugin_forbid */

void quant_plugin_forbid(void) { __atomic_store_n(&forbidden, 1, __ATOMIC_RELEASE); }

enum adapt_status quant_plugin_load(const char *text, int *id)
{
    if (__atomic_load_n(&forbidden, __ATOMIC_ACQUIRE))
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                           "quant plugin %.*s: loading plugins is turned off in this process",
                           QUANT_PLUGIN_TEXT_MAX, text ? text : "");
    struct plugin *cand = calloc(1, sizeof *cand);
    if (!cand) return ADAPT_ERROR(ADAPT_ENOMEM, "quant plugin: out of memory");
    enum adapt_status st = split_text(text, cand->path, cand->symbol, 0);
    if (st != ADAPT_OK) goto free_cand;
    snprintf(cand->text, sizeof cand->text, "%s", text);
    pthread_mutex_lock(&plugins_lock);
    for (int i = 0; i < nplugins; i++)
        if (!strcmp(plugins[i].path, cand->path) && !strcmp(plugins[i].symbol, cand->symbol)) {
            *id = i;
            goto unlock;
        }
    if (nplugins == QUANT_PLUGIN_MAX) {
        st = ADAPT_ERROR(ADAPT_ERANGE, "quant plugin %s: %d plugins are loaded already",
                         cand->path, QUANT_PLUGIN_MAX);
        goto unlock;
    }
    if ((st = plugin_open(cand)) != ADAPT_OK) goto unlock;
    plugins[nplugins] = *cand;
    *id = nplugins;
    __atomic_store_n(&nplugins, nplugins + 1, __ATOMIC_RELEASE);
unlock:
    pthread_mutex_unlock(&plugins_lock);
free_cand:
    free(cand);
    return st;
}

/* ---- the serial kernel behind the OpenMP row driver ---- */

void quant_plugin_run(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, uint64_t *counts)
{
    const struct plugin *e = plugin_get(p->plugin);
    ADAPT_ASSERT(e != NULL);
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t half[QUANT_PIECE] __attribute__((aligned(64)));
    float in[QUANT_PIECE] __attribute__((aligned(64))); /* inputs for the counters: x may be y */
    const int stochastic = p->mode == QUANT_MODE_STOCHASTIC;
    if (!stochastic)
        for (size_t k = 0; k < QUANT_PIECE; k++) half[k] = PLUGIN_NEAREST_BITS;
    size_t j = 0;
    while (j < n) {
        uint64_t i = index + j;
        size_t len = QUANT_PIECE - (size_t)(i % QUANT_PIECE);
        if (len > n - j) len = n - j;
        const uint32_t *r =
            stochastic ? quant_sr_fill(buf, p, i, len) : half;
        if (counts) memcpy(in, x + j, len * sizeof *in);
        apply(e->variant, e->vec, e->scalar, x + j, r, y + j, len);
        if (mask)
            for (size_t k = 0; k < len; k++) mask[j + k] = (uint8_t)plugin_sat(y[j + k]);
        if (counts) {
            uint64_t ns = 0, nf = 0, nz = 0;
            for (size_t k = 0; k < len; k++) {
                float q = y[j + k];
                ns += plugin_sat(q);
                nf += (q == 0.0f && in[k] != 0.0f);
                nz += (q == 0.0f);
            }
            counts[0] += ns;
            counts[1] += nf;
            counts[2] += nz;
        }
        j += len;
    }
}
