/* src/perfmodel/load.c: the one validating trace reader of adapt-perf and
 * adapt-heatmap (see perf.h, perf_trace_load). */
#include "src/perfmodel/perf.h"

enum adapt_status perf_trace_load(const char *path, unsigned flags, const struct perf_params *p,
                                  const struct perf_hw *hw, struct adapt_trace **trace,
                                  struct perf_run **run)
{
    struct adapt_trace *t = NULL;
    struct perf_run *r = NULL;
    enum adapt_status st = adapt_trace_load(&t, path, flags);
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
