# doc/: the man pages of the four programs, made by help2man from their --help and --version
# (not kept in git; configure finds help2man, and without it there are none to install).
if HAVE_HELP2MAN
nodist_man1_MANS = doc/adapt-train.1 doc/adapt-perf.1 doc/adapt-heatmap.1 doc/adapt-bench.1
CLEANFILES += $(nodist_man1_MANS)
H2M = $(AM_V_GEN)$(MKDIR_P) doc && $(HELP2MAN) --no-info --no-discard-stderr \
	--version-string="$(VERSION)"
doc/adapt-train.1: adapt-train$(EXEEXT)
	$(H2M) -n "train a CNN in simulated fixed point under a precision policy" -o $@ ./adapt-train
doc/adapt-perf.1: adapt-perf$(EXEEXT)
	$(H2M) -n "price training runs with the analytical performance model" -o $@ ./adapt-perf
doc/adapt-heatmap.1: adapt-heatmap$(EXEEXT)
	$(H2M) -n "draw per-unit precision heatmaps and cost curves from traces" -o $@ \
	  ./adapt-heatmap
doc/adapt-bench.1: adapt-bench$(EXEEXT)
	$(H2M) -n "time training steps, rounding kernels and GEMMs" -o $@ ./adapt-bench
endif
