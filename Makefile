# localjudge: the two set-up commands of the README.
#   make demo   -> venv + all extras + embedded model weights, then the main job (SummEval, default model)
#   make test   -> venv + all extras + embedded model weights + llama-server, then the whole
#                  test suite (main venv, then the DeepEval adapter in a venv of its own)
# Everything is installed by these targets; nothing needs to be installed by hand.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MODELS_STAMP := $(VENV)/.models-stamp
SERVER_STAMP := $(VENV)/.llama-server-stamp
SUMMEVAL ?= ../shared/data/summeval/summeval.jsonl
DOC ?= 0

.PHONY: demo test test-main test-fast test-integrations install models llama-server lint \
	clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch==2.13.0 is pinned in the [hf] extra: it installs a CPU build from this machine's disk.
# llama-cpp-python compiles from source the first time (about 10 min on 2 cores); pip caches the wheel.
$(STAMP): pyproject.toml Makefile | $(BIN)/python
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/python -m pip install --quiet -e '.[llama,hf,bertscore,dev,server]'
	touch $(STAMP)

install: $(STAMP)

$(MODELS_STAMP): $(STAMP) $(wildcard models/*.toml) scripts/fetch_models.py
	$(BIN)/python scripts/fetch_models.py
	touch $(MODELS_STAMP)

models: $(MODELS_STAMP)

# llama.cpp's C++ llama-server, built from the sources vendored in the pinned llama-cpp-python
# sdist into the cache (about 5-20 min on 2 cores the first time; kept afterwards).
$(SERVER_STAMP): $(STAMP) scripts/build_llama_server.py
	$(BIN)/python scripts/build_llama_server.py
	touch $(SERVER_STAMP)

llama-server: $(SERVER_STAMP)

demo: $(MODELS_STAMP)
	$(BIN)/localjudge summeval --data $(SUMMEVAL) --doc $(DOC) --aspect coherence \
		--out results/summeval-doc$(DOC)-coherence.jsonl

test: test-main test-integrations

test-main: $(MODELS_STAMP) $(SERVER_STAMP)
	LOCALJUDGE_REQUIRE_MODELS=1 $(BIN)/python -m pytest -m "model or not model" -q \
	  --ignore=tests/test_deepeval_adapter.py

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not model" -q

# The DeepEval adapter is tested in a venv of its own: deepeval installs pytest plugins and
# telemetry that must not leak into the main test run. (The OpenAI-compatible backend's tests
# run in the main suite.)
INTEG_VENV := .venv-integrations
INTEG_STAMP := $(INTEG_VENV)/.installed-stamp
$(INTEG_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(INTEG_VENV)
	$(INTEG_VENV)/bin/python -m pip install --quiet --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(INTEG_VENV)/bin/python -m pip install --quiet -e '.[llama,dev,deepeval]'
	touch $(INTEG_STAMP)

test-integrations: $(MODELS_STAMP) $(INTEG_STAMP)
	DEEPEVAL_TELEMETRY_OPT_OUT=YES DEEPEVAL_DISABLE_DOTENV=1 LOCALJUDGE_REQUIRE_MODELS=1 \
	  LOCALJUDGE_REQUIRE_DEEPEVAL=1 $(INTEG_VENV)/bin/python -m pytest -m "model or not model" \
	  -q -p no:cacheprovider -o asyncio_default_fixture_loop_scope=function \
	  tests/test_deepeval_adapter.py

lint: $(STAMP)
	$(BIN)/python -m ruff check localjudge bench scripts tests

clean-venv:
	rm -rf $(VENV) $(INTEG_VENV)
