# Two jobs matter most: `make demo` (grade the simulated class) and `make test`.
# Python: `python3` if it is 3.11 or newer (the course needs nbgrader 0.9.6, which needs 3.11), or PYTHON=...
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN    := PATH="$(CURDIR)/$(BIN):$$PATH"

.PHONY: demo test test-all test-exhaustive test-pythons lab build grade bench clean

# The environment is exactly the Binder one: the same pinned file, then this package.
$(STAMP): .binder/requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  found=$$($(PYTHON) -c 'import sys; print("Python %d.%d" % sys.version_info[:2])' 2>/dev/null || echo "nothing that runs"); \
	  echo "make: the course needs Python 3.11 or newer (nbgrader 0.9.6 does); '$(PYTHON)' is $$found."; \
	  echo "      Install Python 3.11, 3.12 or 3.13 and run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11"; \
	  echo "      (The rooflab library alone runs on Python 3.10: python3 -m pip install -e '.[test]')"; \
	  exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# -qq: pip's errors only; its notices (setuptools' on editable installs) are not for this project's users.
	$(BIN)/python -m pip install -qq --upgrade pip
	$(BIN)/python -m pip install -qq -r .binder/requirements.txt
	@# jsonschema's optional IRI checker compiles a grammar on every import: 3 s per nbgrader run.
	$(BIN)/python -m pip uninstall -qq --yes rfc3987-syntax lark
	$(BIN)/python -m pip install -qq --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(RUN) $(BIN)/course demo

# `make test`: every test not marked exhaustive, on two workers, a count of tests done as it goes, then the
# 15 slowest.  It grades small classes in the sandbox and drives the browser through one notebook; the whole
# demo class, every adversarial kind, every notebook in the browser, the semester of twelve and a clean Binder
# install are `make test-all`'s (README, Tests).
PYTEST := $(RUN) $(BIN)/python -m pytest -q -n 2 --dist loadgroup -o console_output_style=count --durations=15
test: $(STAMP)
	$(PYTEST) -m "not exhaustive"

# Only what `make test` leaves out: the tests marked exhaustive (tests/conftest.py groups the demo class's).
test-exhaustive: $(STAMP)
	$(PYTEST) -m exhaustive

# Everything: `make test`, the exhaustive tests, and the library on every Python found (what .ci/run runs).
test-all: test test-exhaustive test-pythons

# The library's tests and one notebook on every Python 3.10-3.13 found here, each in .venvs/ (.ci/test-pythons).
test-pythons:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { \
	  echo "make: test-pythons runs with Python 3.10 or newer; '$(PYTHON)' is not. Run: make test-pythons PYTHON=/path/to/python3"; \
	  exit 1; }
	$(PYTHON) .ci/test-pythons

lab: $(STAMP)
	$(RUN) $(BIN)/jupyter lab release/

build: $(STAMP)
	$(RUN) $(BIN)/course build

# Every script in benchmarks/, with quick settings (a few students where a class is graded): figures to read,
# noisy on a shared machine.  Each script's docstring gives its full-size run (e.g. bench_cluster --students 200).
bench: $(STAMP)
	$(RUN) $(BIN)/python benchmarks/bench_library.py
	$(RUN) $(BIN)/python benchmarks/bench_efficiency.py
	$(RUN) $(BIN)/python benchmarks/bench_fleet.py
	$(RUN) $(BIN)/python benchmarks/bench_simulate.py
	$(RUN) $(BIN)/python benchmarks/bench_measure.py
	$(RUN) $(BIN)/python benchmarks/bench_grading.py --students 4
	$(RUN) $(BIN)/python benchmarks/bench_cluster.py --students 6 --workers 2 --cores 16

clean:
	rm -rf $(VENV) .venvs demo-class graded
