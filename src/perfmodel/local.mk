# src/perfmodel: analytical and calibrated performance model over traces, and adapt-perf.
# It knows traces and src/base only. price.c prices one interval (analytical and timed),
# analyze.c a run from its trace, schedule.c a per-epoch schedule, run.c holds the run's
# allocation and speed-ups, label.c the names that tell runs apart; internal.h is what they
# share.
noinst_LIBRARIES += libperf.a
libperf_a_SOURCES = src/perfmodel/perf.h src/perfmodel/internal.h src/perfmodel/model.c \
	src/perfmodel/price.c src/perfmodel/analyze.c src/perfmodel/schedule.c src/perfmodel/run.c \
	src/perfmodel/hw.c src/perfmodel/report.c src/perfmodel/load.c src/perfmodel/label.c
PERF_EXT_LIBS = $(JANSSON_LIBS) -lm

bin_PROGRAMS += adapt-perf
adapt_perf_SOURCES = src/perfmodel/adapt-perf.c
adapt_perf_LDADD = $(PERF_LIBS) $(PERF_EXT_LIBS)

# the measured timing tables, installed as $(pkgdatadir)/hw (adapt-perf --hw NAME finds them)
hwdir = $(pkgdatadir)/hw
dist_hw_DATA = $(wildcard $(srcdir)/src/perfmodel/hw/*.json) src/perfmodel/hw/README.md
