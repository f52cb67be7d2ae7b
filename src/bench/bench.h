/* src/bench/bench.h: subcommands of the adapt-bench program.
 *
 * Each subcommand parses its own options and prints a table (or JSON lines
 * with --json); it returns the process exit status.
 *   adapt-bench train --model M --batch B [--json]   training images/s
 *   adapt-bench quant [--json]                       rounding-kernel throughput
 *   adapt-bench gemm [--shapes ...] [-o FILE]        GEMM / element-wise timing table
 *   adapt-bench kl --model M [--weights FILE]        push-down KL against histogram noise
 *   adapt-bench arith [--model M] [--acc A;B]        accumulator models against each other
 */
#ifndef ADAPT_BENCH_BENCH_H
#define ADAPT_BENCH_BENCH_H

int adapt_bench_train(int argc, char **argv);
int adapt_bench_quant(int argc, char **argv);
int adapt_bench_gemm(int argc, char **argv);
int adapt_bench_kl(int argc, char **argv);
int adapt_bench_arith(int argc, char **argv);

/* Monotonic wall clock in seconds. */
double adapt_bench_now(void);

#endif
