# doc/: the man pages of the programs and of adapt-report, made by help2man from their --help and --version
# (not kept in git; configure finds help2man, and without it there are none to install), with
# the sections --help does not give (ENVIRONMENT, FILES, SEE ALSO) from doc/*.h2m: the
# program's own, then common.h2m for every program.
H2M_FILES = doc/common.h2m doc/adapt-train.h2m doc/adapt-perf.h2m doc/adapt-heatmap.h2m \
	doc/adapt-bench.h2m doc/adapt-report.h2m
EXTRA_DIST += $(H2M_FILES)
if HAVE_HELP2MAN
nodist_man1_MANS = doc/adapt-train.1 doc/adapt-perf.1 doc/adapt-heatmap.1 doc/adapt-bench.1
if HAVE_REPORT_MAN
nodist_man1_MANS += doc/adapt-report.1
endif
CLEANFILES += $(nodist_man1_MANS) doc/adapt-report.1 doc/h2m/adapt-report
# adapt-sim.ini(5): every configuration key with its help, accepted values and default, written
# by adapt-train from its key table (src/config/config.c); made with the other man pages
nodist_man5_MANS = doc/adapt-sim.ini.5
CLEANFILES += $(nodist_man5_MANS)
doc/adapt-sim.ini.5: adapt-train$(EXEEXT)
	$(AM_V_GEN)$(MKDIR_P) doc && ./adapt-train --print-schema=man > $@.tmp && mv -f $@.tmp $@
H2M = $(AM_V_GEN)$(MKDIR_P) doc && $(HELP2MAN) --no-info --no-discard-stderr \
	--version-string="$(VERSION)"
doc/adapt-train.1: adapt-train$(EXEEXT) doc/common.h2m doc/adapt-train.h2m
	$(H2M) -n "train a CNN in simulated fixed point under a precision policy" \
	  --include=$(srcdir)/doc/adapt-train.h2m \
	  --include=$(srcdir)/doc/common.h2m -o $@ ./adapt-train
doc/adapt-perf.1: adapt-perf$(EXEEXT) doc/common.h2m doc/adapt-perf.h2m
	$(H2M) -n "price training runs with the analytical performance model" \
	  --include=$(srcdir)/doc/adapt-perf.h2m \
	  --include=$(srcdir)/doc/common.h2m -o $@ ./adapt-perf
doc/adapt-heatmap.1: adapt-heatmap$(EXEEXT) doc/common.h2m doc/adapt-heatmap.h2m
	$(H2M) -n "draw per-unit precision heatmaps and cost curves from traces" \
	  --include=$(srcdir)/doc/adapt-heatmap.h2m \
	  --include=$(srcdir)/doc/common.h2m -o $@ ./adapt-heatmap
doc/adapt-bench.1: adapt-bench$(EXEEXT) doc/common.h2m doc/adapt-bench.h2m
	$(H2M) -n "time training steps, rounding kernels and GEMMs" \
	  --include=$(srcdir)/doc/adapt-bench.h2m \
	  --include=$(srcdir)/doc/common.h2m -o $@ ./adapt-bench
# adapt-report's page from the source tree's report.py, through a wrapper of the installed
# command's name, so that the page names adapt-report
doc/adapt-report.1: experiments/report.py doc/common.h2m doc/adapt-report.h2m adapt-train$(EXEEXT)
	@$(MKDIR_P) doc/h2m && { echo '#!/bin/sh'; \
	  echo 'ADAPT_REPORT_PROG=adapt-report; export ADAPT_REPORT_PROG'; \
	  echo 'exec "$(PYTHON3)" "$(abs_srcdir)/experiments/report.py" --bin "$(abs_builddir)" "$$@"'; \
	} > doc/h2m/adapt-report && chmod +x doc/h2m/adapt-report
	$(H2M) -n "train a list of runs and build a report of tables and pictures" \
	  --include=$(srcdir)/doc/adapt-report.h2m \
	  --include=$(srcdir)/doc/common.h2m -o $@ doc/h2m/adapt-report
endif
