# The two front-door commands:
#   make demo   install into .venv and run the whole pipeline on the bundled corpus
#   make test   install into .venv (with test extras and test corpora) and run every test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= all,test

.PHONY: demo test install lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml scripts/install.sh
	bash scripts/install.sh $(BIN)/python "$(EXTRAS)"
	touch $@

install: $(VENV)/.installed

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/clusterclip demo

test: install
	bash scripts/install-test-corpora.sh $(BIN)/python
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider --timeout=900

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: install
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis
