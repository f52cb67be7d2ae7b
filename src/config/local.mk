# src/config: the run configuration (INI in, JSON and INI out) and its key table.
noinst_LIBRARIES += libconfig.a
libconfig_a_SOURCES = src/config/config.c src/config/config.h
