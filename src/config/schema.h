/* src/config/schema.h: a typed key table for INI settings: parsing, printing, JSON, equality.
 *
 * A schema is a table of keys, one row per "section.key", each naming its
 * type, the field of a caller's struct it fills (offset and size), its
 * default (written as in an INI file and parsed by the same code), its range
 * and its help text. The engine fills and reads such a struct through the
 * table only and knows nothing about what the keys mean; src/config/config.c
 * holds the run configuration's table.
 *
 * Value syntax: integers (int or int64_t) and reals within a range "[lo, hi]"
 * ("(" and ")" for open ends; integer ranges are closed); booleans true/false
 * (also yes/no, on/off, 1/0); strings bare or in double quotes; enums by
 * name; lists "8,12,14,16" (struct adapt_schema_ints, optionally strictly
 * increasing); pair lists "16:8,12:6" (struct adapt_schema_pairs, each
 * member with its own range).
 *
 * INI files (adapt_schema_load): "[section]" headers, "key = value" (or
 * "key: value"), full-line comments starting with ';' or '#', inline
 * comments after whitespace + ';', blank lines; keys are case-sensitive.
 * The file is parsed by inih, fed one line per reader call: Debian's inih
 * is built without INI_HANDLER_LINENO, so the reader counts lines exactly as
 * inih does, and it also removes leading blanks (inih would take an indented
 * line for the continuation of the previous value), refuses key lines longer
 * than inih's buffer (ADAPT_SCHEMA_LINE_MAX characters; comment lines may be
 * longer) and checks section names (inih reports sections only through the
 * keys in them, so an empty unknown section would pass). Every error names
 * the file and line (or the source given to adapt_schema_set), section.key
 * and what was expected.
 *
 *   struct opts { int n; bool verbose; };
 *   static const struct adapt_schema_key rows[] = {
 *       {"main", "n", ADAPT_SCHEMA_INT, ADAPT_SCHEMA_FIELD(struct opts, n), "3", "[1, 10]",
 *        .help = "how many"},
 *       {"main", "verbose", ADAPT_SCHEMA_BOOL, ADAPT_SCHEMA_FIELD(struct opts, verbose),
 *        "false", .help = "talk"}};
 *   static const struct adapt_schema schema = {rows, 2, sizeof(struct opts)};
 *   struct opts o;
 *   int lines[2];
 *   adapt_schema_init(&schema, &o);
 *   st = adapt_schema_load(&schema, &o, "x.ini", lines);
 *
 * Named sections: a schema may also have families of sections "[PREFIX NAME]"
 * (struct adapt_schema_named), any number of them up to a maximum, each filling
 * one item of an array in the caller's struct through a key table of its own
 * (offsets into the item). NAME is [A-Za-z_][A-Za-z0-9_]*, at most
 * ADAPT_SCHEMA_NAME_MAX - 1 characters. A section in a file defines its item
 * whole (a second [PREFIX NAME] with the same NAME in one file is an error);
 * "PREFIX.NAME.KEY=value" assignments set one key, making the item when it is
 * new. Items remember which keys were set (struct adapt_schema_item): printing,
 * JSON and equality cover those keys only, so an unset key keeps meaning "not
 * given" (its default may depend on other keys, which the caller resolves).
 * Printed after the fixed sections, one [PREFIX NAME] each; in JSON under
 * {PREFIX: {NAME: {key: value}}}, present only when there are items.
 *
 * Ownership: the engine borrows the table and the struct; values are held in
 * the struct by value (fixed-size strings and lists). adapt_schema_to_json
 * returns a new reference.
 */
#ifndef ADAPT_SCHEMA_H
#define ADAPT_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "src/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ADAPT_SCHEMA_LIST_MAX 256 /* entries of a list value */
#define ADAPT_SCHEMA_LINE_MAX 198 /* characters of an INI key line (inih's 200-byte buffer) */

enum adapt_schema_type {
    ADAPT_SCHEMA_INT,    /* int */
    ADAPT_SCHEMA_I64,    /* int64_t */
    ADAPT_SCHEMA_DOUBLE, /* double, finite */
    ADAPT_SCHEMA_BOOL,   /* bool */
    ADAPT_SCHEMA_STRING, /* char[size], NUL-terminated */
    ADAPT_SCHEMA_ENUM,   /* an enum (int-sized) with named values */
    ADAPT_SCHEMA_INTS,   /* struct adapt_schema_ints */
    ADAPT_SCHEMA_PAIRS   /* struct adapt_schema_pairs */
};

#define ADAPT_SCHEMA_INCREASING 1u /* ADAPT_SCHEMA_INTS: entries strictly increasing */
/* ADAPT_SCHEMA_ENUM, ADAPT_SCHEMA_STRING: adapt_schema_to_json leaves the key out while it holds
 * its default (a key added after records were written: their JSON stays what it was; readers
 * take the default), and a section all of whose keys it left out */
#define ADAPT_SCHEMA_OMIT_DEFAULT 2u

/* "8,12,14,16" */
struct adapt_schema_ints {
    int n;
    int v[ADAPT_SCHEMA_LIST_MAX]; /* (n) */
};

/* "16:8,12:6": n pairs (a[i], b[i]) */
struct adapt_schema_pairs {
    int n;
    int a[ADAPT_SCHEMA_LIST_MAX]; /* (n) */
    int b[ADAPT_SCHEMA_LIST_MAX]; /* (n) */
};

/* The names of an enum's values: names[v] for v in 0 .. n - 1 (NULL: v has no
 * name and is not accepted). Messages and help list the names in `order`
 * (n values) or, when it is NULL, by value. */
struct adapt_schema_enum {
    const char *const *names;
    int n;
    const int *order;
};

struct adapt_schema_key {
    const char *section, *key;
    enum adapt_schema_type type;
    size_t offset, size; /* of the field in the caller's struct */
    const char *def;     /* default, as written in an INI file */
    const char *range;   /* numbers, list entries, first of a pair; NULL = unbounded */
    const char *range2;  /* second of a pair */
    const struct adapt_schema_enum *choices; /* ENUM */
    const char *const *labels;               /* PAIRS: the names of the two members */
    unsigned flags;      /* ADAPT_SCHEMA_INCREASING, ADAPT_SCHEMA_OMIT_DEFAULT */
    const char *help;
};

/* offset and size of a field, for a key row */
#define ADAPT_SCHEMA_FIELD(type, f) offsetof(type, f), sizeof(((type *)0)->f)

#define ADAPT_SCHEMA_NAME_MAX 32      /* bytes of a named section's NAME, NUL included */
#define ADAPT_SCHEMA_ITEM_KEYS_MAX 16 /* keys of a family of named sections */

/* The first member of every item of a family of named sections. */
struct adapt_schema_item {
    char name[ADAPT_SCHEMA_NAME_MAX];
    int line; /* of its [PREFIX NAME] header in the file; 0 when an assignment made it */
    int set[ADAPT_SCHEMA_ITEM_KEYS_MAX]; /* per key row: the file line that set it, -1 an
                                            assignment, 0 not set (the key's default) */
};

/* A family of named sections "[PREFIX NAME]". */
struct adapt_schema_named {
    const char *prefix;                  /* "format" */
    const struct adapt_schema_key *keys; /* (n) rows; section = prefix, offsets into an item */
    int n;                               /* <= ADAPT_SCHEMA_ITEM_KEYS_MAX */
    size_t item_size;                    /* of an item, whose first member is the head */
    size_t offset;                       /* of the item array (max items) in the struct */
    size_t count_offset;                 /* of its int count */
    int max;
};

struct adapt_schema {
    const struct adapt_schema_key *keys; /* (n); sections in the order of their first row */
    int n;
    size_t size; /* of the struct the keys describe */
    const struct adapt_schema_named *named; /* (nnamed) families of named sections, or NULL */
    int nnamed;
};

/* 1 when name is [A-Za-z_][A-Za-z0-9_]* and shorter than ADAPT_SCHEMA_NAME_MAX. */
int adapt_schema_name_valid(const char *name);

/* The row of section.key, -1 when there is none. */
int adapt_schema_find(const struct adapt_schema *s, const char *section, const char *key);

/* Zeroes obj and sets every key to its default (a default that does not
 * parse is a bug in the table and aborts). */
void adapt_schema_init(const struct adapt_schema *s, void *obj);

/* Applies an INI file on top of obj; lines (s->n entries) receives the line
 * where each key was set, 0 for keys the file does not set. Errors:
 * ADAPT_ENOENT (no such file), ADAPT_EIO (unreadable), ADAPT_EFORMAT
 * (malformed line, NUL byte, line too long), ADAPT_EINVAL (unknown section
 * or key, duplicate key, bad value). obj is unchanged on error. */
enum adapt_status adapt_schema_load(const struct adapt_schema *s, void *obj, const char *path,
                                    int *lines);

/* Applies one "section.key=value" (or "PREFIX.NAME.key=value" for a named
 * section); `where` names its source in messages ("--set"). *row gets the
 * key's row, -1 for a key of a named section. ADAPT_EINVAL on error; obj is
 * then unchanged. */
enum adapt_status adapt_schema_set(const struct adapt_schema *s, void *obj, const char *where,
                                   const char *assignment, int *row);

/* Writes every key as "[section]" headers and "key = value" lines that
 * adapt_schema_load reads back to the same values; with
 * ADAPT_SCHEMA_PRINT_HELP each key is preceded by a comment with its help
 * text, what it accepts and its default, and the first header by a blank
 * line. Flushes f; ADAPT_EIO when anything written to f failed. */
#define ADAPT_SCHEMA_PRINT_HELP 1u
enum adapt_status adapt_schema_print(const struct adapt_schema *s, const void *obj, FILE *f,
                                     unsigned flags);

/* Writes the key table as the body of a man page (roff): per section a ".SS [section]"
 * heading, per key a tagged paragraph with its name, help text, what it accepts and its
 * default; then each family of named sections as ".SS [PREFIX NAME]" with its keys. Flushes f;
 * ADAPT_EIO when anything written to f failed. */
enum adapt_status adapt_schema_print_man(const struct adapt_schema *s, FILE *f);

/* Writes text for roff: backslashes and hyphens escaped, a '.' or '\'' that would start a
 * line made text. */
void adapt_schema_roff_text(FILE *f, const char *text);

/* {section: {key: value}}: integers, reals, booleans, strings (enums by
 * name), lists as arrays, pair lists as arrays of [a, b]. NULL only when out
 * of memory. */
json_t *adapt_schema_to_json(const struct adapt_schema *s, const void *obj);

/* 1 when every key has the same value in a and b (bytes outside the keys'
 * values are ignored) and both have the same named sections (in any order)
 * with the same keys set to the same values; otherwise 0 and, when diff is not
 * NULL, the first differing "section.key" ("PREFIX.NAME" or
 * "PREFIX.NAME.key"). */
int adapt_schema_equal(const struct adapt_schema *s, const void *a, const void *b, char *diff,
                       size_t diff_size);

/* The name of an enum key's value in obj, NULL when section.key is not an enum key. */
const char *adapt_schema_enum_str(const struct adapt_schema *s, const void *obj,
                                  const char *section, const char *key);

#ifdef __cplusplus
}
#endif
#endif
