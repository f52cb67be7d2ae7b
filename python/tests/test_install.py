"""`pip install ./python` works offline with the system's setuptools: the installed package
holds the modules (not the tests) and imports from where it was installed."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from common import SRCDIR, have


@unittest.skipUnless(have("pip") and have("setuptools"), "pip or setuptools not installed")
class TestInstall(unittest.TestCase):
    def test_pip_install(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "python")  # a copy: the build writes beside the sources
            shutil.copytree(os.path.join(SRCDIR, "python"), src,
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            site = os.path.join(d, "site")
            cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                   "--no-build-isolation", "--disable-pip-version-check", "--target", site, src]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.assertEqual(r.returncode, 0, r.stdout.decode(errors="replace"))
            self.assertEqual(sorted(f for f in os.listdir(os.path.join(site, "adaptsim"))
                                    if f.endswith(".py")),
                             ["__init__.py", "_model_reader.py", "model.py", "quant.py",
                              "safetensors.py", "torch_io.py", "trace.py"])
            self.assertFalse(os.path.exists(os.path.join(site, "tests")))
            code = "import adaptsim; print(adaptsim.__file__, adaptsim.__version__)"
            r = subprocess.run([sys.executable, "-c", code], cwd=d, stdout=subprocess.PIPE,
                               env=dict(os.environ, PYTHONPATH=site))
            out = r.stdout.decode().split()
            self.assertEqual(r.returncode, 0)
            self.assertTrue(out[0].startswith(site), out)
            self.assertEqual(out[1], "0.1.0")


if __name__ == "__main__":
    unittest.main()
