# Two commands matter: `make demo` and `make test`. Everything else is what they need.
PYTHON ?= python3
VENV ?= .venv
STUDIO_VENV ?= .studio-venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install studio chromium demo test test-fast lint bench clean

install: $(VENV)/.installed

# torch first, from the CPU wheel on disk, so that the training extra never pulls a CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[all]'
	touch $@

# Label Studio lives in its own virtualenv: its pins (pyarrow, openai, pytz, Django) must not constrain ours.
studio: $(STUDIO_VENV)/.installed chromium

# Headless Chromium for the Label Studio screenshot test (Debian package; a no-op once installed).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo "sudo -n" ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium >/dev/null; } \
	  || echo "warning: could not install chromium; the studio screenshot test will be skipped"

$(STUDIO_VENV)/.installed:
	$(PYTHON) -m venv $(STUDIO_VENV)
	$(STUDIO_VENV)/bin/python -m pip install -q --upgrade pip
	$(STUDIO_VENV)/bin/python -m pip install -q label-studio==1.23.2
	touch $@

demo: install
	$(VENV)/bin/witness demo --out demo-output

test: install studio
	WITNESS_STUDIO_VENV=$(abspath $(STUDIO_VENV)) $(VENV)/bin/python -m pytest

test-fast: install
	$(VENV)/bin/python -m pytest -m "not slow and not studio and not train"

lint: install
	$(VENV)/bin/ruff check witness tests benchmarks

clean:
	rm -rf $(VENV) $(STUDIO_VENV) demo-output .pytest_cache
