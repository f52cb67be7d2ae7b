/* src/perfmodel/load.c: the one validating trace reader of adapt-perf and
 * adapt-heatmap (see perf.h, perf_trace_load). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/fileio.h"
#include "src/perfmodel/perf.h"

/* adapt_trace_load; a trace refused for an incomplete last line (a run still writing it) gets
 * the option that reads it anyway named in the error. */
static enum adapt_status load(struct adapt_trace **t, const char *file, unsigned flags)
{
    enum adapt_status st = adapt_trace_load(t, file, flags);
    if (st != ADAPT_EFORMAT || (flags & ADAPT_TRACE_LOAD_PARTIAL)) return st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", adapt_error_message());
    struct adapt_trace *partial = NULL;
    int cut = adapt_trace_load(&partial, file, flags | ADAPT_TRACE_LOAD_PARTIAL) == ADAPT_OK &&
              partial->truncated;
    adapt_trace_free(partial);
    if (cut)
        return ADAPT_ERROR(st, "%s; if the run is still going, --partial reads the lines before "
                           "it", msg);
    return ADAPT_ERROR(st, "%s", msg);
}

enum adapt_status perf_trace_load(const char *path, unsigned flags, const struct perf_params *p,
                                  const struct perf_hw *hw, struct adapt_trace **trace,
                                  struct perf_run **run)
{
    struct adapt_trace *t = NULL;
    struct perf_run *r = NULL;
    struct stat sb;
    enum adapt_status st;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        /* a run directory of adapt-train: its trace */
        char *file = adapt_path_join(path, "trace.jsonl");
        if (!file) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
        if (access(file, F_OK) != 0) {
            st = ADAPT_ERROR(ADAPT_ENOENT, "%s: a directory without trace.jsonl: give a trace "
                             "file or the run directory adapt-train wrote (--out)", path);
            free(file);
            return st;
        }
        st = load(&t, file, flags);
        free(file);
    } else {
        st = load(&t, path, flags);
    }
    if (st != ADAPT_OK) return st;
    if ((st = perf_run_analyze(&r, t, p, hw)) != ADAPT_OK) {
        adapt_trace_free(t);
        return st;
    }
    if (run) *run = r;
    else perf_run_free(r);
    if (trace) *trace = t;
    else adapt_trace_free(t);
    return ADAPT_OK;
}
