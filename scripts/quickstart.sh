#!/usr/bin/env bash
# The README's quick start. Installs the Debian packages (idempotent), builds,
# then either runs the default experiment ("run") or the test suite ("check").
#   ./scripts/quickstart.sh run     # default experiment
#   ./scripts/quickstart.sh check   # make check
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-run}
case "$what" in
  run|check) ;;
  *) echo "quickstart.sh: expected 'run' or 'check', got '$what'" >&2; exit 2 ;;
esac
./scripts/setup-deps.sh
if [ ! -x configure ] || [ configure.ac -nt configure ]; then ./autogen.sh; fi
if [ ! -f Makefile ] || [ configure -nt Makefile ]; then ./configure; fi
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs"
case "$what" in
  run)
    out=runs/quickstart
    ./adapt-train --config experiments/configs/quickstart.ini --out "$out" --force ;;
  check)
    make -j"$jobs" check ;;
esac
