# src/train: the training loop, the run directory (config.ini, trace), checkpoints and weight
# import, and adapt-train.
noinst_LIBRARIES += libtrain.a
libtrain_a_SOURCES = src/train/train.c src/train/train.h src/train/run_dir.c src/train/run_dir.h \
	src/train/checkpoint.c src/train/checkpoint.h

bin_PROGRAMS += adapt-train
adapt_train_SOURCES = src/train/adapt-train.c
adapt_train_LDADD = $(TRAIN_LIBS) $(ADAPT_EXT_LIBS)
