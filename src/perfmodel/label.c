/* src/perfmodel/label.c: the names that tell runs apart in tables and figures (adapt-perf's
 * rows, adapt-heatmap's legends), perf_runs_label. experiments/report.py follows the same
 * rule (run_labels there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/internal.h"
#include "src/perfmodel/perf.h"

/* A run's location as components joined by single '/': its folder for "DIR/trace.jsonl", else
 * the trace's path without its extension; empty and "." components left out. */
static char *location(const char *path)
{
    size_t n = strlen(path);
    char *loc = malloc(n + 1);
    if (!loc) return NULL;
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    size_t end = n;
    if (!strcmp(file, "trace.jsonl") && slash) end = (size_t)(slash - path);
    else {
        const char *dot = strrchr(file, '.');
        if (dot && dot != file) end = (size_t)(dot - path);
    }
    size_t k = 0;
    for (size_t i = 0; i < end;) {
        size_t len = strcspn(path + i, "/");
        if (i + len > end) len = end - i;
        if (len && !(len == 1 && path[i] == '.')) {
            if (k) loc[k++] = '/';
            memcpy(loc + k, path + i, len);
            k += len;
        }
        i += len + 1;
    }
    loc[k] = 0;
    return loc;
}

/* The last `k` components of loc (all of it when it has fewer). */
static const char *suffix(const char *loc, int k)
{
    const char *p = loc + strlen(loc);
    while (p > loc) {
        if (p[-1] == '/' && --k == 0) break;
        p--;
    }
    return p;
}

static int components(const char *loc)
{
    int c = *loc != 0;
    for (; *loc; loc++) c += *loc == '/';
    return c;
}

enum adapt_status perf_runs_label(struct perf_run **runs, int n)
{
    if (n <= 0) return ADAPT_OK;
    char **loc = calloc((size_t)n, sizeof *loc), **label = calloc((size_t)n, sizeof *label);
    enum adapt_status st = ADAPT_OK;
    if (!loc || !label) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "run names: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (!(loc[i] = location(runs[i]->path ? runs[i]->path : ""))) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "run names: out of memory");
            goto done;
        }
    for (int i = 0; i < n; i++) {
        if (!loc[i][0]) continue; /* no trace (a priced schedule): its name */
        /* the fewest trailing components that no other run of this name shares (a run at
         * the same location cannot be told apart and is passed over) */
        int shared = 0, k = 1, nc = components(loc[i]);
        for (int j = 0; j < n; j++)
            shared |= j != i && loc[j][0] && !strcmp(runs[i]->name, runs[j]->name);
        if (!shared) continue;
        for (; k < nc; k++) {
            int clash = 0;
            for (int j = 0; j < n && !clash; j++)
                clash = j != i && loc[j][0] && strcmp(loc[i], loc[j]) &&
                        !strcmp(runs[i]->name, runs[j]->name) &&
                        !strcmp(suffix(loc[i], k), suffix(loc[j], k));
            if (!clash) break;
        }
        const char *s = suffix(loc[i], k);
        size_t len = strlen(runs[i]->name) + strlen(s) + 4;
        if (!(label[i] = malloc(len))) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "run names: out of memory");
            goto done;
        }
        snprintf(label[i], len, "%s (%s)", runs[i]->name, s);
    }
    for (int i = 0; i < n; i++)
        if (label[i]) {
            free(runs[i]->name);
            runs[i]->name = label[i];
            label[i] = NULL;
        }
done:
    for (int i = 0; loc && i < n; i++) free(loc[i]);
    for (int i = 0; label && i < n; i++) free(label[i]);
    free(loc);
    free(label);
    return st;
}
