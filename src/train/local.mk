# src/train: the training run (train.c: the steps and the epoch loop; setup.c: setup, the checks
# and --dry-run; comp_search.c: the comp policy's plan search; internal.h between them), the run
# directory (config.ini, trace), checkpoints and weight import, and adapt-train.
noinst_LIBRARIES += libtrain.a
libtrain_a_SOURCES = src/train/train.c src/train/train.h src/train/internal.h \
	src/train/setup.c src/train/comp_search.c src/train/run_dir.c src/train/run_dir.h \
	src/train/checkpoint.c src/train/checkpoint.h

bin_PROGRAMS += adapt-train
adapt_train_SOURCES = src/train/adapt-train.c
adapt_train_LDADD = $(TRAIN_LIBS) $(ADAPT_EXT_LIBS)
