# src/plot: pictures (cairo) over the performance model: heatmaps, cost curves, adapt-heatmap.
noinst_LIBRARIES += libplot.a
libplot_a_SOURCES = src/plot/plot.h src/plot/plot.c

bin_PROGRAMS += adapt-heatmap
adapt_heatmap_SOURCES = src/plot/adapt-heatmap.c
adapt_heatmap_LDADD = $(PLOT_LIBS) $(CAIRO_LIBS) $(PERF_EXT_LIBS)
