/* src/config/internal.h: what the parts of the schema engine share (not a public API).
 *
 * The engine is three files: schema.c (fields, value parsing and ranges, defaults, equality),
 * schema_named.c (the families of named sections [PREFIX NAME] and their items) and
 * schema_io.c (INI files in, "section.key=value" assignments, INI, man page and JSON out).
 * Messages are written into the caller's buffer, cut to its size.
 */
#ifndef ADAPT_CONFIG_INTERNAL_H
#define ADAPT_CONFIG_INTERNAL_H

#include <stddef.h>

#include "src/config/schema.h"

/* ---- schema.c */

/* The field of key k in obj. */
void *schema_field_ptr(void *obj, const struct adapt_schema_key *k);
const void *schema_field_cptr(const void *obj, const struct adapt_schema_key *k);
/* 1 when section is one of the fixed sections of s. */
int schema_section_known(const struct adapt_schema *s, const char *section);
/* Appends with snprintf semantics, never overflowing. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void schema_buf_add(char *buf, size_t size, const char *fmt, ...);
/* "run, data, model, ..., PREFIX NAME": the sections of s. */
void schema_section_list(const struct adapt_schema *s, char *buf, size_t size);
/* "seed, out, threads, ...": the keys of `section` among n rows. */
void schema_key_list(const struct adapt_schema_key *keys, int n, const char *section, char *buf,
                     size_t size);
/* The name of value v of an enum key, NULL when it has none. */
const char *schema_enum_name(const struct adapt_schema_key *k, int v);
/* What a key accepts, for messages and help. */
void schema_key_expect(const struct adapt_schema_key *k, char *buf, size_t size);
/* s without its leading and trailing blanks (cut in place). */
char *schema_trim(char *s);
/* What to add to the error of a value that holds " #" (inih's comments), "" otherwise. */
const char *schema_comment_hint(const char *value);
/* Parses text into the field of key k. 0 on success; otherwise why says what is wrong. */
int schema_key_parse(const struct adapt_schema_key *k, const char *text, void *field, char *why,
                     size_t why_size);

/* ---- schema_named.c */

/* The family with this prefix, NULL when there is none. */
const struct adapt_schema_named *schema_named_family(const struct adapt_schema *s,
                                                     const char *prefix);
/* "PREFIX NAME" into its two words, each cut to its buffer; the number of words (0, 1, 2, or 3
 * for more). */
int schema_split_named(const char *section, char *prefix, size_t psize, char *name, size_t nsize);
/* Item i of family f in obj. */
struct adapt_schema_item *schema_item_at(const struct adapt_schema_named *f, void *obj, int i);
const struct adapt_schema_item *schema_citem_at(const struct adapt_schema_named *f, const void *obj,
                                                int i);
/* The number of items of family f in obj. */
int schema_citem_count(const struct adapt_schema_named *f, const void *obj);
/* The index of the item called name, -1 when there is none. */
int schema_item_find(const struct adapt_schema_named *f, const void *obj, const char *name);
/* Item it holds name, every key at its default and none set. */
void schema_item_reset(const struct adapt_schema_named *f, struct adapt_schema_item *it,
                       const char *name, int line);
/* The index of the item called name, made (with `line`) when there is none and room for it;
 * -1 with a message when the name is malformed or the array is full. */
int schema_item_get(const struct adapt_schema_named *f, void *obj, const char *where,
                    const char *name, int line, char *msg, size_t msg_size);
/* Sets key of item `it` from text; line: the file line, or -1 for an assignment. On error the
 * message is written to msg and ADAPT_EINVAL returned (not yet reported). */
enum adapt_status schema_apply_named(const struct adapt_schema_named *f,
                                     struct adapt_schema_item *it, const char *where,
                                     const char *key, const char *value, int line, char *msg,
                                     size_t msg_size);

#endif
