# coevo: set-up, the main job on embedded defaults, and the tests.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# PyTorch's own index of CPU builds: PyPI's torch for Linux is the CUDA build (several GB). --index-url replaces pip's
# index, so where PyTorch's cannot be reached the install is retried once with pip's own configuration (PyPI or a
# mirror: there, on Linux, the CUDA build); TORCH_INDEX= (empty) uses pip's configuration from the start.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup demo test test-fast lint typecheck pytest bench

setup:  ## create .venv with the CPU build of torch and coevo (editable) with dev tools
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(if $(TORCH_INDEX),$(PY) -m pip install --quiet torch==2.13.0 --index-url $(TORCH_INDEX) --retries 1 --timeout 15 || )$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	@$(VENV)/bin/coevo --help >/dev/null && echo "coevo is installed: $(VENV)/bin/coevo"

demo:  ## the main job on embedded defaults (shipped NB201 table, SQLite under ./runs/)
	$(VENV)/bin/coevo search --problem nb201 --dataset cifar10 --device fpga --proposer pelnas --budget 300

test: lint typecheck pytest  ## everything CI checks

lint:  ## ruff, and the layering contracts of pyproject.toml (agent > tools > knowledge > search > sim)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck:
	$(VENV)/bin/mypy

# pytest-xdist: one worker per core, a test file stays on one worker (its module fixtures and order)
PYTEST_JOBS ?= auto
PYTEST_PAR  := -n $(PYTEST_JOBS) --dist loadfile

pytest:  ## --durations: CI's log lists the slowest tests, the place to look when the 25-minute budget tightens
	$(PY) -m pytest -q $(PYTEST_PAR) --durations=25

test-fast: lint typecheck  ## the same checks without the tests marked slow (your own loop; CI runs everything)
	$(PY) -m pytest -q $(PYTEST_PAR) -m "not slow"

bench:  ## co-evolution vs ablations vs baselines, 4 devices x 5 seeds (~20 min on 2 cores)
	$(VENV)/bin/coevo bench --problem nb201 --dataset cifar10 --devices fpga,raspi4,pixel3,eyeriss --proposers pelnas,pelnas-nosurrogate,pelnas-nokb,pelnas-noniche,mobo,tpe,nsga2,random --budget 300 --seeds 5 --jobs 2 --out bench-out
