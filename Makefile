# Two jobs matter most: `make demo` (grade the simulated class) and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lab build grade bench clean

# The environment is exactly the Binder one: the same pinned file, then this package.
$(STAMP): .binder/requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=/path/to/python3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r .binder/requirements.txt
	@# jsonschema's optional IRI checker compiles a grammar on every import: 3 s per nbgrader run.
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax lark
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/course demo

test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

lab: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/jupyter lab release/

build: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/course build

bench: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_library.py
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_efficiency.py
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_fleet.py
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_grading.py

clean:
	rm -rf $(VENV) demo-class graded
