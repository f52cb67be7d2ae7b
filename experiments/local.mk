# experiments/: configs, report and sweep scripts.
dist_noinst_DATA += $(wildcard $(srcdir)/experiments/configs/*.ini)
