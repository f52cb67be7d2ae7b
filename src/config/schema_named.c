/* src/config/schema_named.c: the families of named sections [PREFIX NAME] of the typed key
 * table engine: their items, made by name, and setting an item's keys. */
#include <stdio.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/config/internal.h"

/* -------------------------------------------------------- named sections */

int adapt_schema_name_valid(const char *name)
{
    return adapt_identifier_valid(name, ADAPT_SCHEMA_NAME_MAX);
}

static int *item_count(const struct adapt_schema_named *f, void *obj)
{
    return (int *)((char *)obj + f->count_offset);
}

struct adapt_schema_item *schema_item_at(const struct adapt_schema_named *f, void *obj, int i)
{
    return (struct adapt_schema_item *)((char *)obj + f->offset + (size_t)i * f->item_size);
}

const struct adapt_schema_item *schema_citem_at(const struct adapt_schema_named *f, const void *obj,
                                                int i)
{
    return (const struct adapt_schema_item *)((const char *)obj + f->offset +
                                              (size_t)i * f->item_size);
}

int schema_citem_count(const struct adapt_schema_named *f, const void *obj)
{
    return *(const int *)((const char *)obj + f->count_offset);
}

/* The family with this prefix, NULL when there is none. */
const struct adapt_schema_named *schema_named_family(const struct adapt_schema *s,
                                                     const char *prefix)
{
    for (int i = 0; i < s->nnamed; i++)
        if (!strcmp(s->named[i].prefix, prefix)) return &s->named[i];
    return NULL;
}

/* "PREFIX NAME" (blanks around and between the words) into its two words, each cut to its
 * buffer; returns the number of words (0, 1, 2, or 3 for more). */
int schema_split_named(const char *section, char *prefix, size_t psize, char *name, size_t nsize)
{
    char *out[2] = {prefix, name};
    size_t size[2] = {psize, nsize};
    int words = 0;
    prefix[0] = name[0] = '\0';
    const char *p = section;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return words;
        size_t n = 0;
        while (p[n] && p[n] != ' ' && p[n] != '\t') n++;
        if (words == 2) return 3;
        size_t m = n < size[words] - 1 ? n : size[words] - 1;
        memcpy(out[words], p, m);
        out[words][m] = '\0';
        words++;
        p += n;
    }
}

int schema_item_find(const struct adapt_schema_named *f, const void *obj, const char *name)
{
    for (int i = 0; i < schema_citem_count(f, obj); i++)
        if (!strcmp(schema_citem_at(f, obj, i)->name, name)) return i;
    return -1;
}

static int named_row(const struct adapt_schema_named *f, const char *key)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->keys[i].key, key)) return i;
    return -1;
}

/* Item i holds name, every key at its default and none set. */
void schema_item_reset(const struct adapt_schema_named *f, struct adapt_schema_item *it,
                       const char *name, int line)
{
    ADAPT_ASSERT(f->n <= ADAPT_SCHEMA_ITEM_KEYS_MAX);
    memset(it, 0, f->item_size);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->line = line;
    for (int i = 0; i < f->n; i++) {
        char why[256];
        int bad = schema_key_parse(&f->keys[i], f->keys[i].def, schema_field_ptr(it, &f->keys[i]),
                                   why, sizeof why);
        ADAPT_ASSERT(!bad); /* a default that does not parse is a bug in the table */
    }
}

/* The index of the item called name, made (with `line`) when there is none and room for it;
 * -1 with a message when the name is malformed or the array is full. */
int schema_item_get(const struct adapt_schema_named *f, void *obj, const char *where,
                    const char *name, int line, char *msg, size_t msg_size)
{
    if (!adapt_schema_name_valid(name)) {
        snprintf(msg, msg_size,
                 "%s: [%s %.40s]: a name is a letter or '_' followed by letters, digits or '_', "
                 "at most %d characters",
                 where, f->prefix, name, ADAPT_SCHEMA_NAME_MAX - 1);
        return -1;
    }
    int i = schema_item_find(f, obj, name);
    if (i >= 0) return i;
    int *n = item_count(f, obj);
    if (*n == f->max) {
        snprintf(msg, msg_size, "%s: [%s %s]: more than %d [%s NAME] sections", where, f->prefix,
                 name, f->max, f->prefix);
        return -1;
    }
    schema_item_reset(f, schema_item_at(f, obj, *n), name, line);
    return (*n)++;
}

/* Sets key of item `it` from text; line: the file line, or -1 for an assignment. On error the
 * message is written to msg and ADAPT_EINVAL returned (not yet reported). */
enum adapt_status schema_apply_named(const struct adapt_schema_named *f,
                                     struct adapt_schema_item *it, const char *where,
                                     const char *key, const char *value, int line, char *msg,
                                     size_t msg_size)
{
    char list[512], expect[512], why[256];
    int row = named_row(f, key);
    if (row < 0) {
        schema_key_list(f->keys, f->n, f->prefix, list, sizeof list);
        snprintf(msg, msg_size, "%s: unknown key %s.%s.%s (keys of [%s NAME]: %s)", where,
                 f->prefix, it->name, key, f->prefix, list);
        return ADAPT_EINVAL;
    }
    if (line > 0 && it->set[row] > 0) {
        snprintf(msg, msg_size, "%s: duplicate key %s.%s.%s (first set on line %d)", where,
                 f->prefix, it->name, key, it->set[row]);
        return ADAPT_EINVAL;
    }
    const struct adapt_schema_key *k = &f->keys[row];
    if (schema_key_parse(k, value, schema_field_ptr(it, k), why, sizeof why)) {
        schema_key_expect(k, expect, sizeof expect);
        snprintf(msg, msg_size, "%s: %s.%s.%s = \"%.80s\": %s; expected %s%s", where, f->prefix,
                 it->name, key, value, why, expect, schema_comment_hint(value));
        return ADAPT_EINVAL;
    }
    it->set[row] = line;
    return ADAPT_OK;
}
