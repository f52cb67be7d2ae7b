# experiments/: configs, report and sweep scripts.
dist_noinst_DATA += $(wildcard $(srcdir)/experiments/configs/*.ini)
dist_noinst_DATA += experiments/report.py $(wildcard $(srcdir)/experiments/runlists/*.txt)
dist_noinst_DATA += $(wildcard $(srcdir)/experiments/configs/reference/*.ini) \
	experiments/configs/reference/README.md
