# src/bench: the adapt-bench program (one subcommand per file).
bin_PROGRAMS += adapt-bench
adapt_bench_SOURCES = src/bench/bench.h src/bench/bench_main.c \
	src/bench/bench_train.c src/bench/bench_quant.c src/bench/bench_kl.c src/bench/bench_arith.c \
	src/bench/bench_gemm.c src/bench/gemm_cuda.h
if HAVE_CUDA
adapt_bench_SOURCES += src/bench/gemm_cuda.cu
else
adapt_bench_SOURCES += src/bench/gemm_cuda_none.c
endif
EXTRA_DIST += src/bench/gemm_cuda.cu src/bench/gemm_cuda_none.c
adapt_bench_LDADD = $(TRAIN_LIBS) $(DNNL_LIBS) $(ADAPT_EXT_LIBS)
