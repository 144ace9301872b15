# The two set-up commands: `make demo` (run the main job on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEVCLUSTER := $(BIN)/python -m kueued.devcluster

.PHONY: demo test conformance bench lint clean control-plane dev-cluster dev-cluster-down test-integration e2e-kind

# The install compiles the engine's hot modules with mypyc (setup.py; KUEUED_COMPILE=0 for pure
# Python).  $(NATIVE) compiles them again when one of their sources changed: until then the
# engine imports them all from source (kueued/native.py), so an edit is never hidden by an old build.
NATIVE := $(VENV)/.native
comma := ,
# kueued/native.py's COMPILED names, as paths (make's own functions: no shell at parse time)
NATIVE_SOURCES := $(addsuffix .py,$(subst .,/,$(subst ",,$(filter "kueued.%" "actors.%",$(subst $(comma), ,$(file <kueued/native.py))))))

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP) $(NATIVE)

$(NATIVE): $(STAMP) kueued/native.py $(NATIVE_SOURCES)
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(NATIVE)

demo: $(NATIVE)
	$(BIN)/kueued simulate config/examples/organisation.yaml --output table

test: $(NATIVE)
	$(BIN)/python -m pytest -q

conformance: $(NATIVE)
	$(BIN)/python ../shared/conformance/run ../shared/conformance/scenarios --kueued $(BIN)/kueued

# The local Kubernetes control plane (kube-apiserver, etcd, kubectl built from their Go modules,
# cached under ~/.cache/kueued/control-plane; minutes the first time, a fraction of a second after).
control-plane: $(STAMP)
	$(DEVCLUSTER) build

dev-cluster: $(NATIVE)
	$(DEVCLUSTER) up

dev-cluster-down: $(STAMP)
	$(DEVCLUSTER) down

test-integration: $(NATIVE)
	$(BIN)/python -m pytest -q tests/integration

# The integration suite and Jobs with real pods on a kind cluster (tests/e2e/kind.sh). Without docker
# and kind it says so in one line and exits 0, so it does not depend on the venv: the script makes it.
e2e-kind:
	@MAKE="$(MAKE)" tests/e2e/kind.sh

# The engine's model check (tests/reliability/test_model_check.py) with 20,000 sequences instead of
# CI's 500 (KUEUED_SOAK=<n> for another count); about 40 times the CI run's minute.
.PHONY: soak
soak: $(NATIVE)
	KUEUED_SOAK=$${KUEUED_SOAK:-1} $(BIN)/python -m pytest -q tests/reliability/test_model_check.py --hypothesis-show-statistics

lint: $(STAMP)
	$(BIN)/ruff check kueued actors tests bench
	$(BIN)/python -m mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build *.egg-info .dev-cluster *__mypyc.*.so kueued/_native_build.json
	find kueued actors -name '*.so' -delete
