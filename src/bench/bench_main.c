/* src/bench/bench_main.c: adapt-bench, the benchmark programs' front door. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <config.h>
#include "src/base/version.h"
#include "src/bench/bench.h"
#include "src/quant/gemm_int.h"

double adapt_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: adapt-bench SUBCOMMAND [options]\n"
               "  train   training throughput (images/s) of a model\n"
               "  quant   rounding-kernel throughput against a plain copy\n"
               "  gemm    GEMM and element-wise timing table per number type\n"
               "  kl      the push-down's KL test on a model's weights against histogram noise\n"
               "  arith   one training step under accumulator models, compared bit for bit\n"
               "Run 'adapt-bench SUBCOMMAND --help' for its options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        adapt_version_print(stdout, "adapt-bench");
        return 0;
    }
    const char *isa_error = adapt_gemm_isa_env_error();
    if (isa_error) {
        fprintf(stderr, "adapt-bench: %s\n", isa_error);
        return 1;
    }
    if (!strcmp(argv[1], "train")) return adapt_bench_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "quant")) return adapt_bench_quant(argc - 1, argv + 1);
    if (!strcmp(argv[1], "kl")) return adapt_bench_kl(argc - 1, argv + 1);
    if (!strcmp(argv[1], "gemm")) return adapt_bench_gemm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "arith")) return adapt_bench_arith(argc - 1, argv + 1);
    fprintf(stderr, "adapt-bench: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
