# src/bench: the adapt-bench program (one subcommand per file).
bin_PROGRAMS += adapt-bench
adapt_bench_SOURCES = src/bench/bench.h src/bench/bench_main.c \
	src/bench/bench_train.c src/bench/bench_quant.c
adapt_bench_LDADD = $(ADAPT_LIBS) $(ADAPT_EXT_LIBS)
