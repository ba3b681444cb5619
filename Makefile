# Two commands on a fresh machine: `make run` (the main job) and `make test` (the whole suite).
# Both create .venv on first use and reinstall only when pyproject.toml changes. `make run`
# installs the package and what it needs, nothing else; `make test` adds the test extras.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# Debian's chromium-driver (which brings /usr/bin/chromium): the browser of tests/test_html_report.py
BROWSER := /usr/bin/chromedriver

.PHONY: run test lint bench fidelity training-checks gallery clean

run: $(STAMP)
	$(PY) -m simulator run scenarios/dgx.yaml --trace results/dgx-h100/trace.json --trace-point ring:1MiB

test: lint $(BROWSER)  # the suite on every core (pytest-xdist); plain `pytest` runs it in one process
	$(PY) -m pytest -q -n auto

lint: $(TEST_STAMP)
	$(PY) -m ruff check simulator tests bench
	$(PY) -m mypy

bench: $(TEST_STAMP)
	$(PY) bench/ring_scaling.py

gallery: $(TEST_STAMP) $(BROWSER)  # the README's figures and sample trace (docs/gallery/perfetto.png: bench/perfetto_screenshot.sh)
	HTML_REPORT_SCREENSHOT=docs/gallery/report.png $(PY) -m pytest -q tests/test_html_report.py -k renders
	$(PY) -m simulator run scenarios/dgx.yaml --output docs/gallery --format png --quiet --trace docs/gallery/trace.json --trace-point ring:1MiB
	$(PY) -m simulator run scenarios/train_resnet50.yaml --output docs/gallery --quiet
	$(PY) -m simulator run scenarios/train_llama2_70b_3d.yaml --output docs/gallery --format png --quiet

fidelity: $(TEST_STAMP)
	$(PY) bench/fidelity.py --write docs/fidelity.md

training-checks: $(TEST_STAMP)  # issue 39's checks: Megatron-LM's Table 1, LLaMA-2-70B layouts, speed
	$(PY) bench/megatron.py --write docs/training-checks.md

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -qq -e .  # -qq: not even setuptools' editable-install notice
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)  # the test, lint and optional extras on top of the main job's set
	$(PY) -m pip install -qq -e '.[test]'
	touch $(TEST_STAMP)

$(BROWSER):  # headless Chromium for tests/test_html_report.py (make test only; here ~22 s: 131 packages, 285 MB download, 580 MB installed)
	@command -v apt-get >/dev/null || { echo "make test: tests/test_html_report.py needs Chromium and its driver (/usr/bin/chromium, $(BROWSER)); no apt-get here: install them with your package manager (the rest of the suite runs)"; exit 0; }
	@test "$$(id -u)" = 0 || { echo "make test: tests/test_html_report.py needs Chromium: run 'sudo apt-get install chromium chromium-driver' (apt-get needs root; the rest of the suite runs)"; exit 0; }
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache results/*/
