# src/config: the run configuration (INI in, JSON and INI out): the typed-schema engine
# (schema.c: values, ranges, defaults, equality; schema_named.c: the [PREFIX NAME] families;
# schema_io.c: INI files and assignments in, INI, man page and JSON out; internal.h between
# them), the configuration's key table and API on it (config.c) and its [roles] (roles.c) and [arithmetic] (arith.c).
noinst_LIBRARIES += libconfig.a
libconfig_a_SOURCES = src/config/schema.c src/config/schema_named.c src/config/schema_io.c \
	src/config/schema.h src/config/internal.h src/config/config.c src/config/config.h \
	src/config/roles.c src/config/arith.c
