# src/plot: pictures (cairo) over the performance model: heatmaps, cost curves, adapt-heatmap.
# colour.c builds the colour map, axes.c is the text and axis toolkit of the figures
# (internal.h), heatmap.c, costcurve.c, accuracy.c and wldist.c draw one figure each.
noinst_LIBRARIES += libplot.a
libplot_a_SOURCES = src/plot/plot.h src/plot/internal.h src/plot/colour.c src/plot/axes.c \
	src/plot/heatmap.c src/plot/costcurve.c src/plot/accuracy.c src/plot/wldist.c

bin_PROGRAMS += adapt-heatmap
adapt_heatmap_SOURCES = src/plot/adapt-heatmap.c
adapt_heatmap_LDADD = $(PLOT_LIBS) $(CAIRO_LIBS) $(PERF_EXT_LIBS)
