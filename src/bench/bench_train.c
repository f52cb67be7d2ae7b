/* src/bench/bench_train.c: adapt-bench train (filled in with the engine). */
#include <stdio.h>

#include "src/bench/bench.h"

int adapt_bench_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "adapt-bench train: not available in this build\n");
    return 2;
}
