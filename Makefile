# Two commands for a newcomer: `make run` starts the gateway, `make test` runs every test.
# Everything the project needs is installed from here (Python packages, the console's npm
# packages, Debian's chromium for the browser tests).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONSOLE := modelgate/console/web

CLIENTS := tests/clients

.PHONY: run test install console system-deps clients agent-clis bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

# The console is built into modelgate/console/dist and served by the gateway under /console.
# File targets: `make run` rebuilds only when a web source or the lock file changed.
CONSOLE_DIST := modelgate/console/dist/index.html
CONSOLE_MODULES := $(CONSOLE)/node_modules/.package-lock.json
CONSOLE_SOURCES := $(shell find $(CONSOLE)/src -type f 2>/dev/null) $(CONSOLE)/index.html \
	$(CONSOLE)/vite.config.ts $(CONSOLE)/tsconfig.json $(CONSOLE)/package.json

$(CONSOLE_MODULES): $(CONSOLE)/package.json $(CONSOLE)/package-lock.json
	cd $(CONSOLE) && (npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error)
	touch $@

$(CONSOLE_DIST): $(CONSOLE_SOURCES) $(CONSOLE_MODULES)
	cd $(CONSOLE) && npm run build --silent
	touch $@

console: $(CONSOLE_DIST)

# Real clients the end-to-end tests drive (the Codex CLI, the Vercel AI SDK, the vendors' Node SDKs), pinned by
# tests/clients/package-lock.json and installed again only when it changes. Without them
# those tests skip and say why.
CLIENTS_MODULES := $(CLIENTS)/node_modules/.package-lock.json

$(CLIENTS_MODULES): $(CLIENTS)/package.json $(CLIENTS)/package-lock.json
	@cd $(CLIENTS) && (npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.package-lock.json \
		|| echo "note: npm ci in $(CLIENTS) failed; the Codex CLI and AI SDK tests will skip")

clients: $(CLIENTS_MODULES)

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

# Coding-agent CLIs the end-to-end tests drive (tests/agents/package.json, pinned by its lock file;
# Claude Code's npm package brings its native binary as a platform package). Without the npm
# registry the install fails softly and those tests skip, saying why.
AGENTS := tests/agents
AGENTS_MODULES := $(AGENTS)/node_modules/.package-lock.json

agent-clis: $(AGENTS_MODULES)

$(AGENTS_MODULES): $(AGENTS)/package.json $(AGENTS)/package-lock.json
	@cd $(AGENTS) && (npm ci --no-audit --no-fund --loglevel=error \
		|| echo "note: npm could not install $(AGENTS): the Claude Code and opencode end-to-end tests will skip")

# Without npm the gateway still starts, without the console (it says so).
run: install
	@if command -v npm >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory console; \
	else \
		echo "note: npm not found: starting without the web console (install Node.js 20+ with npm, then make console)"; \
	fi
	$(VENV)/bin/modelgate serve

# The type check first (pyproject.toml, [tool.mypy]): seconds, and it names the line.
test: install console system-deps clients agent-clis
	$(PY) -m mypy
	$(PY) -m pytest

bench: install
	$(PY) bench/run.py

# Build outputs only: data/ holds the database and the encryption key and is never deleted here.
clean:
	rm -rf $(VENV) $(CONSOLE)/node_modules $(CLIENTS)/node_modules modelgate/console/dist $(AGENTS)/node_modules
