# Two commands from a fresh machine: `make demo` and `make test`. Both create .venv first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export RAY_AUTH_MODE ?= disabled
export MUJOCO_GL ?= osmesa
export PYOPENGL_PLATFORM ?= osmesa

.PHONY: setup demo lint format test test-slow bench audit clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/rlinf train configs/sim_franka_reach_ppo.yaml

# Formatter, linter and type checker over the whole repository (scripts/static_checks.sh): any
# finding fails, with its file:line and the command that fixes it. It never rewrites a file.
lint: setup
	@bash scripts/static_checks.sh

# The fix for the formatter's findings and ruff's safe fixes (it rewrites files; review the diff).
format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The default tier: the static checks, then every behaviour test (what CI and a newcomer run).
test: setup
	@bash scripts/static_checks.sh
	@bash scripts/run_tests.sh -m "not slow"

# The slow tier: learning thresholds, the full sim -> ROS parity walk, fresh-venv installs and the
# longer conformance runs of external simulators. Run it before calling a change done.
test-slow: setup
	@bash scripts/run_tests.sh -m slow

bench: setup
	@# RLinf 0.3.0 is the peer in benchmarks/channel.py; its metadata pins would replace our stack.
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps rlinf==0.3.0
	@# Exit code 3: the benchmark needs hardware that is not here (gpu_check.py: a CUDA device);
	@# it says so and the loop goes on.
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b; rc=$$?; \
		if [ $$rc -eq 3 ]; then echo "== $$b: skipped (exit 3: needs hardware not present)"; \
		elif [ $$rc -ne 0 ]; then exit 1; fi; done

# Known vulnerabilities in the installed environment (queries the PyPI / OSV advisory database:
# needs the network). --strict: a package that could not be audited fails the target, so an
# unreachable database never reads as "no known vulnerabilities". The editable project is skipped.
audit: setup
	$(VENV)/bin/pip-audit --strict --skip-editable --progress-spinner off

clean:
	rm -rf $(VENV) .pytest_cache
