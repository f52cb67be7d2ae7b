# tests/: one Check program per module.
TEST_LDADD = $(ADAPT_LIBS) $(CHECK_LIBS) $(ADAPT_EXT_LIBS)
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)

check_PROGRAMS += tests/test_base
tests_test_base_SOURCES = tests/test_base.c
tests_test_base_CFLAGS = $(TEST_CFLAGS)
tests_test_base_LDADD = $(TEST_LDADD)
TESTS += tests/test_base

check_PROGRAMS += tests/test_models tests/test_optim
tests_test_models_SOURCES = tests/test_models.c
tests_test_models_CFLAGS = $(TEST_CFLAGS)
tests_test_models_LDADD = $(TEST_LDADD)
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CFLAGS = $(TEST_CFLAGS)
tests_test_optim_LDADD = $(TEST_LDADD)
TESTS += tests/test_models tests/test_optim

check_PROGRAMS += tests/test_train
tests_test_train_SOURCES = tests/test_train.c
tests_test_train_CFLAGS = $(TEST_CFLAGS)
tests_test_train_LDADD = $(TEST_LDADD)
TESTS += tests/test_train

# every shipped configuration loads (adapt-train --dry-run)
TESTS += tests/configs_dry_run.sh
EXTRA_DIST += tests/configs_dry_run.sh

# Python: the adaptsim package (python/), the trace's JSON Schema and the example notebook.
# The wrappers skip (exit 77) without a python3 that has numpy (and matplotlib for the notebook).
TESTS += tests/python.test tests/notebook.test
EXTRA_DIST += tests/python.test tests/notebook.test tests/python-env.sh \
	doc/trace.schema.json python/pyproject.toml python/README.md \
	python/adaptsim/__init__.py python/adaptsim/trace.py python/adaptsim/safetensors.py \
	python/adaptsim/torch_io.py python/tests/common.py python/tests/validate_trace.py \
	python/tests/run_notebook.py python/tests/test_trace.py python/tests/test_safetensors.py \
	python/tests/test_schema.py python/tests/test_torch.py python/tests/test_install.py \
	experiments/notebooks/reading_traces.ipynb

check_PROGRAMS += tests/test_checkpoint
tests_test_checkpoint_SOURCES = tests/test_checkpoint.c
tests_test_checkpoint_CFLAGS = $(TEST_CFLAGS)
tests_test_checkpoint_LDADD = $(TEST_LDADD)
TESTS += tests/test_checkpoint
