# Two commands on a fresh machine: `make demo` (a local Neo4j with the demo on it) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test unit typecheck bench up down status clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,browser,embeddings,bench,graphiti,service,granian,langgraph]'
	touch $@

# Runs the demo against the local Neo4j (started here, left running). Without Java but with a
# Docker engine, it uses docker-compose.yml instead (needs NEO4J_PASSWORD set).
demo: install
	@if ! command -v java >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
	  docker compose up -d --wait && \
	  NEO4J_URI=bolt://127.0.0.1:7687 $(BIN)/sgam demo; \
	else \
	  $(BIN)/sgam neo4j up && $(BIN)/sgam demo; \
	fi

# Unit and integration tests against a real Neo4j that the test session starts and stops.
test: install
	$(BIN)/python -m pytest

unit: install
	$(BIN)/python -m pytest tests/unit

# mypy (strict on graph/), under the installed module names: see .ci/typecheck.py.
typecheck: install
	$(BIN)/python .ci/typecheck.py

# On a throwaway local Neo4j of its own (removed afterwards), unless NEO4J_URI names a server.
bench: install
	$(BIN)/sgam bench

up: install
	$(BIN)/sgam neo4j up

down:
	$(BIN)/sgam neo4j down

status:
	$(BIN)/sgam neo4j status

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .mypy_cache
