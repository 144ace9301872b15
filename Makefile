# The two set-up commands: `make demo` (run the main job on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test conformance bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kueued simulate config/examples/organisation.yaml --output table

test: $(STAMP)
	$(BIN)/python -m pytest -q

conformance: $(STAMP)
	$(BIN)/python ../shared/conformance/run ../shared/conformance/scenarios --kueued $(BIN)/kueued

lint: $(STAMP)
	$(BIN)/ruff check kueued actors tests bench

clean:
	rm -rf $(VENV) build *.egg-info
