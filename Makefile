# The two front-door commands:
#   make demo   install into .venv and run the whole pipeline on the bundled corpus
#   make test   install into .venv (with test extras and test corpora) and run every test
# and: make examples   run every examples/*/run.sh (trainers fed a schedule, checked)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= all,test
# Trainer-side data libraries tested in their own environments (.venvs/NAME): their pins
# clash with .venv (mosaicml-streaming needs numpy<2.2 and transformers<5).
CLIENTS ?= streaming litdata

.PHONY: demo test examples install client-envs lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml scripts/install.sh
	bash scripts/install.sh $(BIN)/python "$(EXTRAS)"
	touch $@

install: $(VENV)/.installed

# Rebuilt when the script changes; after changing clusterclip[io] itself, `rm -rf .venvs`.
.venvs/%/.installed: scripts/install-client-env.sh
	bash scripts/install-client-env.sh $* $(PYTHON)

client-envs: $(CLIENTS:%=.venvs/%/.installed)

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/clusterclip demo

test: install client-envs
	bash scripts/install-test-corpora.sh $(BIN)/python
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider --timeout=900

examples: install
	bash scripts/run-examples.sh $(abspath $(BIN)/python)

lint: install
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

format: install
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

clean:
	rm -rf $(VENV) .venvs build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis
	rm -f src/clusterclip/schedule/*.so

# The MDS and LitData examples run in their client environments.
examples: client-envs
