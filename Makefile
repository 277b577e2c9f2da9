# The two commands a new user needs: `make verify` (the main job) and `make test`.  Both set up first.
VENV := .venv
STAMP := $(VENV)/.setup-done

.PHONY: setup verify test test-fast mutation bench clean claims-doc

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

# Mutation score per probe and rule module (slow: hours for everything on 2 cores; not part of CI).
# MODULES narrows it (`make mutation MODULES="bench/stats/basic.py bench/families/ecm/probes.py"`), JOBS and
# MINUTES (cap per test folder) are passed on; QUICK=1 leaves the `slow` tests out; see docs/mutation.md.
MODULES ?=
JOBS ?= 1
MINUTES ?= 60
QUICK ?=
mutation: $(STAMP)
	$(VENV)/bin/python -c "import mutmut" 2>/dev/null || $(VENV)/bin/python -m pip install --quiet -e ".[mutation]"
	$(VENV)/bin/python scripts/mutation.py --jobs $(JOBS) --minutes $(MINUTES) $(if $(QUICK),--leave-out-slow) $(MODULES)

# The claim catalogue and the probes' and rules' parameters, generated from the specs and the code (a test fails
# when either is stale: regenerate after editing a spec or a probe's or rule's parameters).
claims-doc: $(STAMP)
	$(VENV)/bin/bench list specs/ --markdown -o docs/CLAIMS.md
	$(VENV)/bin/bench describe --markdown -o docs/PARAMETERS.md

clean:
	rm -rf runs/ .pytest_cache
