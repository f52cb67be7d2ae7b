/* src/trace/internal.h: what the trace writer and reader share (not a public API).
 *
 * The record vocabulary (event kinds, end statuses) and the bounded line reader that both the
 * reader and adapt_trace_truncate_after_epoch use. Defined in src/trace/read.c.
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

#endif
