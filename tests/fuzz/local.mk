# tests/fuzz: libFuzzer harnesses for every parser of outside input
# (configure CC=clang --enable-fuzzers; make fuzz). seeds.sh makes their seed
# corpora from small valid files; run.sh runs them.
FUZZ_HARNESSES = tests/fuzz/fuzz_idx tests/fuzz/fuzz_cifar tests/fuzz/fuzz_safetensors \
	tests/fuzz/fuzz_ini tests/fuzz/fuzz_trace tests/fuzz/fuzz_format tests/fuzz/fuzz_model
EXTRA_DIST += tests/fuzz/seeds.sh tests/fuzz/run.sh tests/fuzz/fuzz.h tests/fuzz/format.dict \
	tests/fuzz/model.dict
CLEANFILES += $(FUZZ_HARNESSES)
if FUZZERS
EXTRA_PROGRAMS += $(FUZZ_HARNESSES)
FUZZER_LINK = $(AM_LDFLAGS) -fsanitize=fuzzer
# Every harness links the libraries of all parsers it may reach (global LDADD: no other program
# relies on it) and the libFuzzer driver; sources default to tests/fuzz/<name>.c.
LDADD = $(TRAIN_LIBS) $(PERF_LIBS) $(ADAPT_EXT_LIBS)
tests_fuzz_fuzz_idx_LDFLAGS = $(FUZZER_LINK)
tests_fuzz_fuzz_cifar_LDFLAGS = $(FUZZER_LINK)
tests_fuzz_fuzz_safetensors_LDFLAGS = $(FUZZER_LINK)
tests_fuzz_fuzz_ini_LDFLAGS = $(FUZZER_LINK)
tests_fuzz_fuzz_trace_LDFLAGS = $(FUZZER_LINK)
tests_fuzz_fuzz_format_LDFLAGS = $(FUZZER_LINK)
tests_fuzz_fuzz_model_LDFLAGS = $(FUZZER_LINK)

fuzz: $(FUZZ_HARNESSES)
# A smoke run: each harness over its seeds and FUZZ_RUNS more inputs.
FUZZ_RUNS = 2000
fuzz-smoke: fuzz
	$(srcdir)/tests/fuzz/run.sh smoke $(FUZZ_RUNS)
else
fuzz fuzz-smoke:
	@echo "configure CC=clang --enable-fuzzers to build the fuzz harnesses" >&2; exit 1
endif
.PHONY: fuzz fuzz-smoke
