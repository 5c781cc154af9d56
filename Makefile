# Two commands do all the set-up on a fresh machine:  make run  and  make test.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The test suite runs against the real PostgreSQL and Redis of this machine.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/empathy
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: run test bench lint format migrate demo clean

# uv installs the pinned set about six times faster than pip (downloads in parallel): most of a first start.
UV_VERSION := 0.13.9

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@# The site runs from this checkout: install the dependencies pyproject.toml pins, not the project itself.
	@$(PY) scripts/requirements.py > $(VENV)/requirements.txt
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(PY) -c requirements.lock -r $(VENV)/requirements.txt
	@touch $(STAMP)

## run: a local site on an embedded SQLite database with the two demo studies; tasks run in-process.
## The participant links and the admin login are printed once the server answers.
run: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) scripts/run_local.py $(HOST) $(PORT)

## test: the whole suite (PostgreSQL, Redis, a real Celery worker, headless Chromium), on three worker processes
## (pytest-xdist: tests/conftest.py says how many; PYTEST_ARGS="-n0" runs it in one).
test: $(STAMP)
	@bash scripts/ensure-chromium
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) DJANGO_ENV=test \
		$(BIN)/pytest $(PYTEST_ARGS)

## bench: the benchmarks under bench/, each printing one JSON object.
bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b" >&2; $(PY) $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) var
