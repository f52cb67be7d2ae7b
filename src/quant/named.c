/* src/quant/named.c: the process-wide table of named formats (src/quant/quant.h, "named
 * formats"), which quant_spec_parse consults after the built-in names. */
#include <pthread.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/quant/quant.h"

struct named {
    char name[QUANT_FORMAT_NAME_MAX];
    struct quant_spec spec;
};

static struct named named[QUANT_FORMAT_NAMED_MAX];
static int nnamed;
static pthread_mutex_t named_lock = PTHREAD_MUTEX_INITIALIZER;

int quant_format_name_valid(const char *name)
{
    return adapt_identifier_valid(name, QUANT_FORMAT_NAME_MAX);
}

int quant_format_reserved(const char *name)
{
    return quant_type_find(name) != NULL || !strcmp(name, "float32") || !strcmp(name, "fp32");
}

/* The entry of name, or -1 (under the lock). */
static int find(const char *name)
{
    for (int i = 0; i < nnamed; i++)
        if (!strcmp(named[i].name, name)) return i;
    return -1;
}

enum adapt_status quant_format_define(const char *name, const struct quant_spec *s)
{
    if (!quant_format_name_valid(name))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "format name '%.40s': expected a letter or '_' followed by letters, "
                           "digits or '_', at most %d characters",
                           name ? name : "(null)", QUANT_FORMAT_NAME_MAX - 1);
    if (quant_format_reserved(name))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "format name '%s' is taken by a built-in format; choose another name",
                           name);
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    struct quant_spec t = *s;
    t.rounding = QUANT_ROUND_NEAREST; /* the format, not how it is rounded */
    t.tie = QUANT_TIE_EVEN;
    t.sr_bits = QUANT_SR_BITS_32;
    pthread_mutex_lock(&named_lock);
    int i = find(name);
    if (i < 0 && nnamed == QUANT_FORMAT_NAMED_MAX) {
        pthread_mutex_unlock(&named_lock);
        return ADAPT_ERROR(ADAPT_ERANGE, "format '%s': more than %d named formats", name,
                           QUANT_FORMAT_NAMED_MAX);
    }
    if (i < 0) {
        i = nnamed++;
        strcpy(named[i].name, name);
    }
    named[i].spec = t;
    pthread_mutex_unlock(&named_lock);
    return ADAPT_OK;
}

enum adapt_status quant_format_lookup(const char *name, struct quant_spec *s)
{
    if (!name) return ADAPT_ENOENT;
    pthread_mutex_lock(&named_lock);
    int i = find(name);
    if (i >= 0) *s = named[i].spec;
    pthread_mutex_unlock(&named_lock);
    return i >= 0 ? ADAPT_OK : ADAPT_ENOENT;
}

void quant_format_clear(void)
{
    pthread_mutex_lock(&named_lock);
    nnamed = 0;
    pthread_mutex_unlock(&named_lock);
}
