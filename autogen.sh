#!/bin/sh
# Regenerates configure and Makefile.in (autoconf 2.71, automake 1.16).
set -e
cd "$(dirname "$0")"
autoreconf -fi
