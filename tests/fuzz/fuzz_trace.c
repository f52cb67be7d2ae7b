/* tests/fuzz/fuzz_trace.c: libFuzzer harness for the trace: the reader (whole
 * and partial), the validating reader of adapt-perf and adapt-heatmap, and
 * the cut-back that --resume makes. */
#include "src/perfmodel/perf.h"
#include "src/trace/trace.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct adapt_trace *t = NULL;
    const char *p = fuzz_file(data, size, "trace.jsonl");
    if (adapt_trace_load(&t, p, 0) == ADAPT_OK) adapt_trace_free(t);
    struct perf_params pp;
    perf_params_init(&pp);
    struct perf_run *run = NULL;
    t = NULL;
    if (perf_trace_load(p, ADAPT_TRACE_LOAD_PARTIAL, &pp, NULL, &t, &run) == ADAPT_OK) {
        perf_run_free(run);
        adapt_trace_free(t);
    }
    adapt_trace_truncate_after_epoch(p, (int)(size % 3));
    return 0;
}
