# tests/python-env.sh: sourced by the Python test wrappers. Sets PYTHON to the first of
# $PYTHON, /usr/bin/python3 (Debian's, where python3-numpy installs) and python3 on PATH
# that imports numpy and the modules given in $PY_NEEDS; returns 1 (after saying why) when
# none does.
PYTHONDONTWRITEBYTECODE=1
MPLBACKEND=Agg
export PYTHONDONTWRITEBYTECODE MPLBACKEND
_py_found=
for _py in ${PYTHON:-} /usr/bin/python3 python3; do
  command -v "$_py" >/dev/null 2>&1 || continue
  if "$_py" -c "import numpy${PY_NEEDS:+, $PY_NEEDS}" >/dev/null 2>&1; then
    _py_found=$_py
    break
  fi
done
if [ -z "$_py_found" ]; then
  echo "SKIP: no python3 with numpy${PY_NEEDS:+, $PY_NEEDS}" \
    "(Debian packages: scripts/setup-deps.sh)"
  return 1
fi
PYTHON=$_py_found
echo "python: $PYTHON ($("$PYTHON" --version 2>&1))"
