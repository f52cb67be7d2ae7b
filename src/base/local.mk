# src/base: status codes, logging, atomic file writes, host/device macros, counter-based RNG.
noinst_LIBRARIES += libadaptbase.a
libadaptbase_a_SOURCES = \
	src/base/status.c src/base/status.h \
	src/base/log.c src/base/log.h \
	src/base/fileio.c src/base/fileio.h \
	src/base/hd.h src/base/rng.h
