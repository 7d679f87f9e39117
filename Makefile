# localjudge: the two set-up commands of the README.
#   make demo   -> venv + all extras + embedded model weights, then the main job (SummEval, default model)
#   make test   -> venv + all extras + embedded model weights, then the whole test suite
# Everything is installed by these targets; nothing needs to be installed by hand.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MODELS_STAMP := $(VENV)/.models-stamp
SUMMEVAL ?= ../shared/data/summeval/summeval.jsonl
DOC ?= 0

.PHONY: demo test test-fast test-integrations install models lint clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch==2.13.0 is pinned in the [hf] extra: it installs a CPU build from this machine's disk.
# llama-cpp-python compiles from source the first time (about 10 min on 2 cores); pip caches the wheel.
$(STAMP): pyproject.toml | $(BIN)/python
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/python -m pip install --quiet -e '.[llama,hf,bertscore,dev]'
	touch $(STAMP)

install: $(STAMP)

$(MODELS_STAMP): $(STAMP) $(wildcard models/*.toml) scripts/fetch_models.py
	$(BIN)/python scripts/fetch_models.py
	touch $(MODELS_STAMP)

models: $(MODELS_STAMP)

demo: $(MODELS_STAMP)
	$(BIN)/localjudge summeval --data $(SUMMEVAL) --doc $(DOC) --aspect coherence \
		--out results/summeval-doc$(DOC)-coherence.jsonl

test: $(MODELS_STAMP)
	LOCALJUDGE_REQUIRE_MODELS=1 $(BIN)/python -m pytest -m "model or not model" -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not model" -q

# The DeepEval adapter and the OpenAI-compatible backend are tested in a venv of their own:
# deepeval installs pytest plugins and telemetry that must not leak into the main test run.
INTEG_VENV := .venv-integrations
test-integrations: $(MODELS_STAMP)
	$(PYTHON) -m venv $(INTEG_VENV)
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(INTEG_VENV)/bin/python -m pip install --quiet -e '.[llama,hf,dev,server,deepeval]'
	DEEPEVAL_TELEMETRY_OPT_OUT=YES DEEPEVAL_DISABLE_DOTENV=1 LOCALJUDGE_REQUIRE_MODELS=1 \
	  $(INTEG_VENV)/bin/python -m pytest -m "model or not model" -q -p no:cacheprovider \
	  tests/test_openai_compat.py tests/test_openai_compat_server.py tests/test_deepeval_adapter.py

lint: $(STAMP)
	$(BIN)/python -m ruff check localjudge bench scripts tests

clean-venv:
	rm -rf $(VENV)
