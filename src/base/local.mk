# src/base: what every module uses and that knows nothing of training: status codes, logging,
# file helpers (atomic write, strings, paths), the safetensors container, host/device macros,
# the counter-based RNG.
noinst_LIBRARIES += libadaptbase.a
libadaptbase_a_SOURCES = \
	src/base/status.c src/base/status.h \
	src/base/log.c src/base/log.h \
	src/base/fileio.c src/base/fileio.h \
	src/base/safetensors.c src/base/safetensors.h \
	src/base/hd.h src/base/rng.h
