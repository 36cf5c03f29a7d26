# Two commands for a newcomer: `make run` starts the gateway, `make test` runs every test.
# Everything the project needs is installed from here (Python packages, the console's npm
# packages, Debian's chromium for the browser tests).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONSOLE := modelgate/console/web

.PHONY: run test install console system-deps bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

# The console is built into modelgate/console/dist and served by the gateway under /console.
console:
	@if [ -f $(CONSOLE)/package.json ]; then \
		cd $(CONSOLE) && (npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error) && npm run build --silent; \
	fi

# Debian packages the tests use: chromium for the console tests, wrk for the benchmark smoke test.
system-deps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v wrk >/dev/null 2>&1 || missing="$$missing wrk"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else \
			echo "note: install$$missing with apt-get to run the tests that need them"; \
		fi; \
	fi

run: install console
	$(VENV)/bin/modelgate serve

test: install console system-deps
	$(PY) -m pytest

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) data $(CONSOLE)/node_modules modelgate/console/dist
