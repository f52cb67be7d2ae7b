# experiments/: configs, run lists and the report script. `make install` puts them under
# $(pkgdatadir) (PREFIX/share/adapt-sim) in the same layout, experiments/configs/... and
# experiments/report.py, so that the run lists' relative configuration paths hold there too;
# adapt-train --config NAME finds them (adapt_find_file), and the adapt-report command runs the
# installed report.py with the installed programs.
exp_rel = $(patsubst $(srcdir)/%,%,$(1))
nobase_dist_pkgdata_DATA = \
	$(call exp_rel,$(wildcard $(srcdir)/experiments/configs/*.ini)) \
	$(call exp_rel,$(wildcard $(srcdir)/experiments/configs/reference/*.ini)) \
	experiments/configs/reference/README.md \
	$(call exp_rel,$(wildcard $(srcdir)/experiments/runlists/*.txt))
nobase_dist_pkgdata_SCRIPTS = experiments/report.py

bin_SCRIPTS = adapt-report
CLEANFILES += adapt-report
adapt-report: Makefile
	$(AM_V_GEN){ echo '#!/bin/sh'; \
	  echo '# adapt-report: the report script of the installed adapt-sim, with its programs'; \
	  echo 'ADAPT_REPORT_PROG=adapt-report; export ADAPT_REPORT_PROG'; \
	  echo 'exec python3 "$(pkgdatadir)/experiments/report.py" --bin "$(bindir)" "$$@"'; \
	} > $@.tmp && chmod +x $@.tmp && mv -f $@.tmp $@

# After make install (make distcheck runs this): the installed programs run, the installed
# adapt-train finds a shipped configuration by name, the report command and the man pages are
# there.
installcheck-local:
	cd /tmp && "$(DESTDIR)$(bindir)/adapt-train" --version | grep -q '^adapt-train (adapt-sim)'
	test -f "$(DESTDIR)$(pkgdatadir)/experiments/configs/c100_alexnet.ini"
	test -f "$(DESTDIR)$(pkgdatadir)/experiments/configs/reference/lenet_msgd_fp_mnist.ini"
	test -x "$(DESTDIR)$(pkgdatadir)/experiments/report.py"
	test -f "$(DESTDIR)$(hwdir)/cpu-epyc-avx512vnni-1thread.json"
	test -f "$(DESTDIR)$(pkgdatadir)/models/resnet.model"
	test -f "$(DESTDIR)$(pkgdatadir)/models/mobilenetv2.model"
	cd /tmp && o=adapt-installcheck.$$$$.out; \
	  { "$(DESTDIR)$(bindir)/adapt-train" --config c100_alexnet.ini --dry-run > $$o 2>&1 || \
	    grep -q '^data:   not available: ' $$o; }; rc=$$?; rm -f $$o; exit $$rc
	"$(DESTDIR)$(bindir)/adapt-report" --help > /dev/null
if HAVE_HELP2MAN
	test -f "$(DESTDIR)$(man1dir)/adapt-train.1"
	test -f "$(DESTDIR)$(man5dir)/adapt-sim.ini.5"
endif
if HAVE_REPORT_MAN
	test -f "$(DESTDIR)$(man1dir)/adapt-report.1"
endif
