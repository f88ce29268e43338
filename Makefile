# The two commands of the README. Both are idempotent: a second run skips what is done.
PYTHON ?= python3
DEMO_TASK ?= write a function that returns the n-th Fibonacci number and print fib(10)

.PHONY: demo test engine image check unit record

engine:
	bash sandbox/setup-engine.sh

# (1) Install everything and run one %%agent task end to end on the embedded model.
demo: engine
	$(PYTHON) -m pip install -q -e '.[local,mcp]'
	selfheal sandbox build
	selfheal model fetch
	selfheal run "$(DEMO_TASK)"

# (2) Run the test suite (what .ci/run calls).
test:
	SELFHEAL_WITH_BROWSER=1 SELFHEAL_WITH_PODMAN=1 SELFHEAL_WITH_HUB=1 SELFHEAL_WITH_MCP=1 bash sandbox/setup-engine.sh
	# The local Kubernetes (tests marked kubernetes, run last): its packages now, its build
	# (once; cached) in the background at the lowest priority while the rest runs.
	bash sandbox/setup-kubernetes.sh packages
	nice -n 19 bash sandbox/setup-kubernetes.sh build >/tmp/selfheal-kubernetes-build.log 2>&1 &
	$(PYTHON) -m pip install -q -e '.[test,local,local-small,eval,service,mcp,kubernetes]'
	$(PYTHON) -m pip install -q --no-deps --ignore-requires-python dataframebench==0.1.1
	selfheal sandbox build
	selfheal model fetch
	$(MAKE) check
	$(PYTHON) -m pytest -q -n 2 --dist loadgroup --durations=25

# For contributors, after `pip install -e '.[check]'` (no root, no engine, no model):
# lint, format, types and the import graph (pyproject.toml's [tool.importlinter]).
check:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy
	lint-imports

# The unit lane, after `pip install -e '.[test]'` (no root, no engine, no model, no browser):
# tests/unit/, every test that needs none of them.
unit:
	$(PYTHON) -m pytest -q tests/unit

# The real runner's results that tests/unit/'s loop tests replay (tests/recorded_sandbox.py),
# recorded again on the engine: after a change to what the loop runs or to the runner.
record:
	$(PYTHON) -m pytest -q tests/unit --record-sandbox
