#!/bin/sh
# Installs the Debian 12 packages adapt-sim builds, tests and runs with.
# Idempotent; needs root (or sudo). Set ADAPT_SKIP_APT=1 to skip. ADAPT_WITH_TORCH=1 adds
# python3-torch (PyTorch, for the tests that compare with it; they skip without it).
# slurm-wlm and munge serve tests/slurm_sweep.test, which starts its own private munged,
# slurmctld and slurmd: the packages' services are not started while they are installed (a
# policy-rc.d that refuses, unless the machine has one), so installing them needs neither
# systemd nor a cluster configuration, and leaves no daemon running.
set -eu
[ "${ADAPT_SKIP_APT:-0}" = 1 ] && exit 0
PKGS="build-essential autoconf automake libtool pkg-config
 libgsl-dev check libsubunit-dev libinih-dev libjansson-dev zlib1g-dev
 libopenblas-openmp-dev libarchive-dev libcairo2-dev libdnnl-dev parallel
 clang libclang-rt-14-dev libomp-dev git help2man
 dataset-fashion-mnist slurm-wlm munge
 python3 python3-numpy python3-jsonschema python3-matplotlib python3-setuptools python3-pip
 python3-pil
 jupyter-nbconvert python3-nbformat python3-ipykernel"
[ "${ADAPT_WITH_TORCH:-0}" = 1 ] && PKGS="$PKGS python3-torch"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup-deps: installing:$missing"
  # keep the daemons of the new packages (munge, slurmd, slurmctld) from starting: their
  # postinst scripts fail (and apt-get with them) when a service cannot start
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    trap '$SUDO rm -f "$policy"' EXIT
    printf '#!/bin/sh\n# setup-deps.sh: no services start while packages install\nexit 101\n' |
      $SUDO tee "$policy" > /dev/null
    $SUDO chmod 755 "$policy"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
