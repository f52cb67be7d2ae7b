/* src/trace/internal.h: what the trace writer and reader share (not a public API).
 *
 * The record vocabulary (event kinds, end statuses) and the bounded line reader that both the
 * reader and adapt_trace_truncate_after_epoch use, defined in src/trace/read.c; and between the
 * reader's two files, read.c (lines into JSON records, adapt_trace_load) and read_records.c (the
 * typed fields and records), the reader's state and the one call from the first to the second.
 */
#ifndef ADAPT_TRACE_INTERNAL_H
#define ADAPT_TRACE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "src/trace/trace.h"

/* Names of enum adapt_trace_event_kind and enum adapt_trace_end_status in the file. */
extern const char *const adapt_trace_event_names[2];
extern const char *const adapt_trace_end_names[2];

/* The longest line a reader accepts: a record of adapt-train is a few kB per
 * unit; 4 MiB is far above any and bounds what a hostile file can cost. */
#define ADAPT_TRACE_LINE_MAX ((size_t)4 << 20)

/* Reads one line, its '\n' included, growing *buf up to ADAPT_TRACE_LINE_MAX
 * bytes. Returns the length (0 at the end of the file), -1 on a read error
 * or when out of memory (errno says which), -2 when the line is longer. */
ssize_t adapt_trace_read_line(FILE *f, char **buf, size_t *cap);
/* The error of an adapt_trace_read_line result below 0 at line `line`. */
enum adapt_status adapt_trace_line_error(const char *path, int64_t line, ssize_t n);
/* json_loadb of one line, telling an allocation failure (*oom = 1: jansson reports some of them
 * as syntax errors) from a malformed line. */
json_t *adapt_trace_parse_json(const char *line, size_t n, size_t flags, json_error_t *err,
                               int *oom);

/* Where the reader is, for messages; the first problem is kept. */
struct adapt_trace_rd {
    const char *path;
    int64_t line;
    const char *rec;
    int bad;
    enum adapt_status st;
    char msg[512];
};

/* A trace being read: where the reader is, and the capacities of its growing arrays. */
struct adapt_trace_loader {
    struct adapt_trace_rd r;
    struct adapt_trace *t;
    int64_t step_cap, step_line_cap, epoch_cap, epoch_line_cap, sample_cap;
};

/* Reads record o of type `type` (its "type" field) into ld->t; problems are left in ld->r
 * (src/trace/read_records.c, which also has adapt_trace_free). */
void adapt_trace_read_record(struct adapt_trace_loader *ld, json_t *o, const char *type);

#endif
