#!/bin/sh
# Installs the Debian 12 packages adapt-sim builds, tests and runs with.
# Idempotent; needs root (or sudo). Set ADAPT_SKIP_APT=1 to skip.
set -eu
[ "${ADAPT_SKIP_APT:-0}" = 1 ] && exit 0
PKGS="build-essential autoconf automake libtool pkg-config
 libgsl-dev check libsubunit-dev libinih-dev libjansson-dev zlib1g-dev
 libopenblas-openmp-dev libarchive-dev libcairo2-dev parallel
 clang libclang-rt-14-dev libomp-dev git help2man
 dataset-fashion-mnist
 python3 python3-numpy python3-jsonschema python3-matplotlib python3-setuptools python3-pip
 jupyter-nbconvert python3-nbformat python3-ipykernel"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup-deps: installing:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
