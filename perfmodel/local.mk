# perfmodel/: analytical and calibrated performance model over traces.
noinst_LIBRARIES += libperf.a
libperf_a_SOURCES = perfmodel/perf_placeholder.c
