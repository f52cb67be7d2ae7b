# src/config: the run configuration (INI in, JSON and INI out): the typed-schema engine
# (schema.c) and the configuration's key table and API on it (config.c).
noinst_LIBRARIES += libconfig.a
libconfig_a_SOURCES = src/config/schema.c src/config/schema.h src/config/config.c src/config/roles.c \
	src/config/config.h
