# perfmodel/: analytical and calibrated performance model over traces, and
# the report and picture programs built on it.
noinst_LIBRARIES += libperf.a
libperf_a_SOURCES = perfmodel/perf.h perfmodel/model.c perfmodel/cost.c perfmodel/hw.c \
	perfmodel/report.c perfmodel/load.c

# perfmodel/ knows traces and src/base only.
PERF_LIBS = libperf.a libtrace.a libadaptbase.a
PERF_EXT_LIBS = $(JANSSON_LIBS) -lm

bin_PROGRAMS += adapt-perf
adapt_perf_SOURCES = perfmodel/adapt-perf.c
adapt_perf_LDADD = $(PERF_LIBS) $(PERF_EXT_LIBS)

# The test compares the built-in model table with the engine's models, so it
# links the engine too.
check_PROGRAMS += tests/test_perf
tests_test_perf_SOURCES = tests/test_perf.c
tests_test_perf_CFLAGS = $(TEST_CFLAGS)
tests_test_perf_LDADD = $(TEST_LDADD)
TESTS += tests/test_perf

# Pictures (cairo): heatmaps and cost curves.
noinst_LIBRARIES += libperfplot.a
libperfplot_a_SOURCES = perfmodel/plot.h perfmodel/plot.c

bin_PROGRAMS += adapt-heatmap
adapt_heatmap_SOURCES = perfmodel/adapt-heatmap.c
adapt_heatmap_LDADD = libperfplot.a $(PERF_LIBS) $(CAIRO_LIBS) $(PERF_EXT_LIBS)

check_PROGRAMS += tests/test_plot
tests_test_plot_SOURCES = tests/test_plot.c
tests_test_plot_CFLAGS = $(TEST_CFLAGS)
tests_test_plot_LDADD = libperfplot.a $(TEST_LDADD)
TESTS += tests/test_plot

dist_noinst_DATA += $(wildcard $(srcdir)/perfmodel/hw/*.json) perfmodel/hw/README.md
