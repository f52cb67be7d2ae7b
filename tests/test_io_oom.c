/* tests/test_io_oom.c: the trace reader when memory runs out, part of tests/test_io: every
 * allocation of a load (and of the resume truncation) made to fail in turn, through malloc,
 * calloc and realloc wrappers, and jansson's allocator failing. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/safetensors.h"
#include "src/trace/trace.h"
#include "tests/test_io.h"
#include "tests/testutil.h"

/* ------------------------------------------------- allocation-failure injection
 *
 * test_io is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/local.mk), so
 * every allocation made by the code linked into it (the trace reader and src/base) goes through
 * the wrappers below. With
 * fail_at >= 0 the allocation numbered fail_at (counting from 0 since n_allocs was reset) fails
 * as malloc does when memory runs out. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
static long fail_at = -1, n_allocs;

static int alloc_fails(void)
{
    if (fail_at < 0) return 0;
    if (n_allocs++ != fail_at) return 0;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n) { return alloc_fails() ? NULL : __real_malloc(n); }

void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) { return alloc_fails() ? NULL : __real_realloc(p, n); }

/* jansson's allocator in test_trace_out_of_memory: every allocation fails. (Failing one in the
 * middle of a parse is not tried: jansson 2.14 then writes a byte past a string buffer.) */
static void *json_malloc_none(size_t n)
{
    (void)n;
    errno = ENOMEM;
    return NULL;
}

/* Running out of memory anywhere while reading a trace is reported as such (ADAPT_ENOMEM, "out
 * of memory", with the file), never as a malformed or empty trace, and frees what it had: each
 * allocation the reader makes (counted by the wrappers above) is made to fail in turn, until the
 * load needs fewer allocations than the index that would fail. Under
 * the sanitizer build LeakSanitizer checks that every failed load freed everything. */
START_TEST(test_trace_out_of_memory)
{
    char path[256];
    tmp_file(path, sizeof path, "oom.jsonl");
    write_trace(path);
    static const unsigned flags[2] = {0, ADAPT_TRACE_LOAD_PARTIAL};
    for (int f = 0; f < 2; f++) {
        long k;
        for (k = 0;; k++) {
            struct adapt_trace *t = NULL;
            adapt_error_clear();
            n_allocs = 0;
            fail_at = k;
            enum adapt_status st = adapt_trace_load(&t, path, flags[f]);
            fail_at = -1;
            if (n_allocs <= k) { /* this load made fewer than k + 1 allocations: none failed */
                ck_assert_int_eq(st, ADAPT_OK);
                ck_assert_int_eq(t->n_steps, 3);
                adapt_trace_free(t);
                break;
            }
            ck_assert_msg(st == ADAPT_ENOMEM, "allocation %ld of the load failed: status %d, "
                          "message \"%s\"", k, (int)st, adapt_error_message());
            ck_assert_ptr_null(t);
            ck_assert_msg_has("out of memory");
            ck_assert_msg_has("oom.jsonl");
        }
        /* the line buffer, the trace, its header's strings and arrays, the step and epoch
         * arrays and their per-unit states: over 30 points */
        ck_assert_int_gt(k, 30);
    }
    /* the same for the resume truncation, which reads the trace up to an epoch record */
    long k;
    for (k = 0;; k++) {
        adapt_error_clear();
        n_allocs = 0;
        fail_at = k;
        enum adapt_status st = adapt_trace_truncate_after_epoch(path, 1);
        fail_at = -1;
        if (n_allocs <= k) {
            ck_assert_int_eq(st, ADAPT_OK);
            break;
        }
        ck_assert_msg(st == ADAPT_ENOMEM, "allocation %ld of the truncation failed: status %d, "
                      "message \"%s\"", k, (int)st, adapt_error_message());
        ck_assert_msg_has("out of memory");
    }
    ck_assert_int_gt(k, 0); /* its line buffer */
    /* jansson out of memory: reported as such, not as malformed JSON */
    struct adapt_trace *t = NULL;
    json_set_alloc_funcs(json_malloc_none, free);
    adapt_error_clear();
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_ENOMEM);
    ck_assert_msg_has("oom.jsonl:1: out of memory");
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 1), ADAPT_ENOMEM);
    ck_assert_msg_has("oom.jsonl:1: out of memory");
    json_set_alloc_funcs(malloc, free);
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->n_steps, 2); /* truncated after epoch 1, intact otherwise */
    adapt_trace_free(t);
}
END_TEST

void test_io_add_oom(TCase *trace)
{
    tcase_add_test(trace, test_trace_out_of_memory);
}
