# The two commands a new user needs: `make verify` (the main job) and `make test`.  Both set up first.
VENV := .venv
STAMP := $(VENV)/.setup-done

.PHONY: setup verify test test-fast bench clean

$(STAMP): scripts/setup.sh pyproject.toml
	./scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

verify: $(STAMP)
	$(VENV)/bin/bench verify specs/

test: $(STAMP)  ## everything, the full 10,000-mutant spec fuzz included (a plain `pytest` runs a few hundred)
	$(VENV)/bin/python -m pytest -q -m "fuzz or not fuzz"

test-fast: $(STAMP)  ## the unit tests only, without the real embedded models
	$(VENV)/bin/python -m pytest -q -m "not embedded"

clean:
	rm -rf runs/ .pytest_cache
