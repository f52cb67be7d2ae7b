# tests/: one Check program per module. Each links its module's libraries (the *_LIBS lists in
# Makefile.am) and nothing above them, so a test that compiles against a module also checks
# that the module stays in its layer. Sources default to tests/<name>.c; a program built from
# several files lists them (and its private header tests/<name>.h) in its _SOURCES.
#
# tests/libtestutil.a (tests/testutil.h: temporary directories, files, commands, fills, float
# comparisons, the suite runner) needs only src/base, Check and libc, so every test links it.
# It comes after the module's libraries in each LDADD line, followed by src/base again so that
# its own needs resolve whatever the module list pulled in. tests/libtestutil_net.a
# (tests/testutil_net.h: standalone layers, gradient checks) needs src/net. Neither is
# installed; both are built by make check (or on demand, for tests/bench_layers).
check_LIBRARIES = tests/libtestutil.a tests/libtestutil_net.a
tests_libtestutil_a_SOURCES = tests/testutil.c tests/testutil.h
tests_libtestutil_net_a_SOURCES = tests/testutil_net.c tests/testutil_net.h
TEST_LIBS = tests/libtestutil.a $(BASE_LIBS) $(CHECK_LIBS) $(ADAPT_EXT_LIBS)

check_PROGRAMS += tests/test_base tests/test_quant tests/test_quant_cuda tests/test_config \
	tests/test_data tests/test_layers tests/test_models tests/test_optim tests/test_gemm_int \
	tests/test_policy tests/test_train tests/test_checkpoint tests/test_io tests/test_perf \
	tests/test_plot tests/test_graph tests/test_net_cuda tests/test_graphamp tests/test_comp \
	tests/test_policy_cuda tests/test_roles tests/test_roles_mx tests/test_arith
tests_test_base_LDADD = $(NET_LIBS) $(CUDA_DEV_LIBS) $(TEST_LIBS)
tests_test_quant_SOURCES = tests/test_quant.c tests/test_quant_kernels.c tests/test_quant_fixed.c \
	tests/test_quant_float.c tests/test_quant_custom.c tests/test_quant_stats.c \
	tests/test_quant_accum.c tests/test_quant_sr16.c tests/test_quant.h
tests_test_quant_LDADD = $(QUANT_LIBS) $(CUDA_DEV_LIBS) $(TEST_LIBS)
tests_test_quant_cuda_LDADD = $(QUANT_LIBS) $(CUDA_DEV_LIBS) $(TEST_LIBS)
tests_test_net_cuda_SOURCES = tests/test_net_cuda.c tests/test_net_cuda_layers.c \
	tests/test_net_cuda_models.c tests/test_net_cuda_reductions.c tests/test_net_cuda.h
tests_test_net_cuda_LDADD = $(NET_LIBS) $(TEST_LIBS)
tests_test_policy_cuda_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_config_SOURCES = tests/test_config.c tests/test_config_errors.c \
	tests/test_config_formats.c tests/test_config_print.c tests/test_config_schema.c \
	tests/test_config.h
tests_test_config_LDADD = $(CONFIG_LIBS) $(TEST_LIBS)
tests_test_data_SOURCES = tests/test_data.c tests/test_data_cifar.c tests/test_data_order.c \
	tests/test_data.h
tests_test_data_LDADD = $(DATA_LIBS) $(TEST_LIBS)
tests_test_layers_SOURCES = tests/test_layers.c tests/test_layers_gconv.c tests/test_layers_act.c \
	tests/test_layers_join.c tests/test_layers_pool.c tests/test_layers_bn.c \
	tests/test_layers_api.c tests/test_layers.h
tests_test_layers_LDADD = tests/libtestutil_net.a $(NET_LIBS) $(TEST_LIBS)
tests_test_models_LDADD = $(NET_LIBS) $(TEST_LIBS)
tests_test_optim_LDADD = $(NET_LIBS) $(TEST_LIBS)
tests_test_gemm_int_SOURCES = tests/test_gemm_int.c
tests_test_gemm_int_LDADD = $(NET_LIBS) $(TEST_LIBS)
tests_test_policy_SOURCES = tests/test_policy.c tests/test_policy_engine.c \
	tests/test_policy_amp_muppet.c tests/test_policy.h
tests_test_policy_LDADD = tests/libtestutil_net.a $(POLICY_LIBS) $(TEST_LIBS)
tests_test_roles_LDADD = tests/libtestutil_net.a $(POLICY_LIBS) $(TEST_LIBS)
tests_test_roles_mx_LDADD = tests/libtestutil_net.a $(POLICY_LIBS) $(TEST_LIBS)
tests_test_arith_LDADD = tests/libtestutil_net.a $(POLICY_LIBS) $(TEST_LIBS)
tests_test_graphamp_LDADD = $(POLICY_LIBS) $(TEST_LIBS)
tests_test_comp_LDADD = $(PERF_LIBS) $(POLICY_LIBS) $(TEST_LIBS)
tests_test_train_LDADD = $(TRAIN_LIBS) $(TEST_LIBS)
tests_test_checkpoint_LDADD = $(TRAIN_LIBS) $(TEST_LIBS)
tests_test_io_SOURCES = tests/test_io.c tests/test_io_read.c tests/test_io_oom.c \
	tests/test_io_safetensors.c tests/test_io.h
tests_test_io_LDADD = $(TRACE_LIBS) $(TEST_LIBS)
tests_test_graph_LDADD = $(GRAPH_LIBS) $(TEST_LIBS)
# test_io fails chosen allocations of the trace reader (test_trace_out_of_memory)
tests_test_io_LDFLAGS = -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc
# test_perf compares the performance model's built-in model table with the engine's models,
# so it also links src/net.
tests_test_perf_SOURCES = tests/test_perf.c tests/test_perf_models.c tests/test_perf_errors.c \
	tests/test_perf_report.c tests/test_perf.h
tests_test_perf_LDADD = $(PERF_LIBS) $(NET_LIBS) $(TEST_LIBS)
tests_test_plot_SOURCES = tests/test_plot.c tests/test_plot_heatmap.c tests/test_plot_curves.c \
	tests/test_plot.h
tests_test_plot_LDADD = $(PLOT_LIBS) $(CAIRO_LIBS) $(TEST_LIBS)
TESTS += $(check_PROGRAMS)

# Per-layer timing at the model shapes (not a test): make tests/bench_layers
EXTRA_PROGRAMS += tests/bench_layers
tests_bench_layers_LDADD = tests/libtestutil_net.a $(NET_LIBS) $(TEST_LIBS)
CLEANFILES += tests/bench_layers
# The same layers timed in PyTorch, for comparison (not built, not run).
EXTRA_DIST += tests/bench_layers_torch.py tests/testutil_cuda.h

# every #include across folders follows the layering (HACKING.md)
TESTS += tests/layering.test
EXTRA_DIST += tests/layering.test

# the small promises of the command-line programs (--version, argument checks)
TESTS += tests/cli_small.test
EXTRA_DIST += tests/cli_small.test

# what the programs say to a command line that is nearly right (a missing --config, a missing
# '=', a file of the wrong kind)
TESTS += tests/cli_hints.test
EXTRA_DIST += tests/cli_hints.test
# The man pages help2man makes: each exists, has its sections and renders without a groff warning
TESTS += tests/man_pages.test
EXTRA_DIST += tests/man_pages.test

# what adapt-train says about a run: the data split, the configuration it evaluates under,
# formats it refuses, the precision summary at the end
TESTS += tests/train_cli.test
EXTRA_DIST += tests/train_cli.test

# one process per run directory: two adapt-train processes on one --out
TESTS += tests/run_lock.test
EXTRA_DIST += tests/run_lock.test

# experiments/report.py's Slurm job array on a private single-node Slurm cluster (munged,
# slurmctld, slurmd started as root in a temporary folder), then the same list under GNU
# parallel; skips without root or the Debian packages slurm-wlm and munge
TESTS += tests/slurm_sweep.test
EXTRA_DIST += tests/slurm_sweep.test

# every command the README shows runs (shortened)
TESTS += tests/readme_commands.test
EXTRA_DIST += tests/readme_commands.test

# the GPU engine's host side under a counting stand-in for the CUDA libraries (no GPU needed):
# what a training step launches (scripts/cuda-census.sh); skips in builds without CUDA
TESTS += tests/cuda_census.test
EXTRA_DIST += tests/cuda_census.test

# adapt-bench gemm's oneDNN comparison (skips in builds without oneDNN)
TESTS += tests/gemm_onednn.test
EXTRA_DIST += tests/gemm_onednn.test

# every shipped configuration loads (adapt-train --dry-run)
TESTS += tests/configs_dry_run.sh
EXTRA_DIST += tests/configs_dry_run.sh

# Python: the adaptsim package (python/), the trace's JSON Schema and the example notebook.
# The wrappers skip (exit 77) without a python3 that has numpy (and matplotlib for the notebook).
TESTS += tests/python.test tests/notebook.test
EXTRA_DIST += tests/python.test tests/notebook.test tests/python-env.sh \
	doc/trace.schema.json python/pyproject.toml python/README.md \
	python/adaptsim/__init__.py python/adaptsim/trace.py python/adaptsim/safetensors.py \
	python/adaptsim/torch_io.py python/adaptsim/model.py python/adaptsim/_model_reader.py \
	python/tests/common.py python/tests/validate_trace.py python/tests/test_model.py \
	python/tests/run_notebook.py python/tests/test_trace.py python/tests/test_safetensors.py \
	python/tests/test_schema.py python/tests/test_torch.py python/tests/test_install.py \
	python/tests/test_report.py python/tests/test_quantize.py python/tests/test_roles_reference.py \
	python/adaptsim/quant.py \
	experiments/notebooks/reading_traces.ipynb

# adaptsim.quantize (python/tests/test_quantize.py, run by tests/python.test) against this helper,
# which rounds with libquant.a's quant_rows directly; made by make check (check_DATA), not a test
# itself (TESTS holds check_PROGRAMS)
EXTRA_PROGRAMS += tests/quant_rows_dump
tests_quant_rows_dump_LDADD = $(QUANT_LIBS) $(ADAPT_EXT_LIBS)
CLEANFILES += tests/quant_rows_dump

# The [roles] recipes against an outside reference (python/tests/test_roles_reference.py, run by
# tests/python.test; skipped without torch): this helper writes one forward and backward of a
# model under a recipe, as the policy leaves it; made by make check (check_DATA), not a test
EXTRA_PROGRAMS += tests/roles_step_dump
tests_roles_step_dump_LDADD = $(POLICY_LIBS) $(ADAPT_EXT_LIBS)
CLEANFILES += tests/roles_step_dump

# Rounding plugins: the example plugin against its rule, threads, the reference twin, a plugin
# whose vector variant disagrees with its scalar function and one whose symbols are data, and
# copies of the example cut short or patched (all refused on load). The plugins
# are found through ADAPT_BUILDDIR (AM_TESTS_ENVIRONMENT).
check_PROGRAMS += tests/test_plugin
tests_test_plugin_LDADD = $(QUANT_LIBS) $(CUDA_DEV_LIBS) $(TEST_LIBS)
check_DATA = tests/plugins/bad_simd.so tests/plugins/data_symbols.so tests/quant_rows_dump \
	tests/roles_step_dump
tests/plugins/bad_simd.so: tests/plugins/bad_simd.c
	@$(MKDIR_P) tests/plugins
	$(AM_V_CC)$(CC) $(PLUGIN_CFLAGS) -o $@ $(srcdir)/tests/plugins/bad_simd.c
tests/plugins/data_symbols.so: tests/plugins/data_symbols.c
	@$(MKDIR_P) tests/plugins
	$(AM_V_CC)$(CC) $(PLUGIN_CFLAGS) -o $@ $(srcdir)/tests/plugins/data_symbols.c
EXTRA_DIST += tests/plugins/bad_simd.c tests/plugins/data_symbols.c
CLEANFILES += tests/plugins/bad_simd.so tests/plugins/data_symbols.so
