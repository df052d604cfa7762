# The two commands of the README, plus the checks CI and reviewers run.
# `uv` is installed on first use if the machine lacks it (`pip --user`: ~/.local/bin,
# often not on PATH); tools/uv finds it there, for this file and every documented command.
SHELL := /bin/bash
UV := $(CURDIR)/tools/uv

.PHONY: dev test unit lint controlplane uv image

uv:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet --user uv \
		|| python3 -m pip install --quiet --break-system-packages --user uv

## dev: start a local control plane with a kwok Node, install the CRDs and a sample pool, run
## the operator (relay pods Running). `make dev CLUSTERS=2`: east and west joined by Lighthouse
## (each log line says its cluster=). LOG_FORMAT=json|console: the log lines (console, piped
## or not, unless set)
dev: uv
	$(UV) run --frozen dynamo-pool-operator dev --clusters $(or $(CLUSTERS),1) \
		$(if $(LOG_FORMAT),--log-format $(LOG_FORMAT))

## test: lint (ruff, mypy --strict), then every tier (unit, integration against the real
## control plane, e2e, faults). Lint first: it takes seconds and fails for certain.
test: uv
	$(UV) sync --frozen
	$(MAKE) --no-print-directory lint
	bash tools/controlplane/build.sh
	$(UV) run --frozen pytest

unit: uv
	$(UV) run --frozen pytest -m "not integration and not e2e and not faults"

lint: uv
	$(UV) run --frozen ruff check src tests tools bench
	$(UV) run --frozen ruff format --check src tests tools bench
	$(UV) run --frozen mypy
	$(UV) run --frozen lint-imports --no-cache

## controlplane: build (or find in the cache) kube-apiserver, etcd, kube-controller-manager, helm,
## kwok and the Lighthouse agent
controlplane:
	bash tools/controlplane/build.sh

## image: build the operator image from the Dockerfile with docker (when its daemon answers)
## or buildah (no daemon). IMAGE=name:tag names it; PYTHON_IMAGE=... UV_IMAGE=... replace
## the Dockerfile's base images (e.g. a mirror of python:3.11-slim)
IMAGE ?= dynamo-pool-operator:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
image:
	@args="$(if $(PYTHON_IMAGE),--build-arg PYTHON_IMAGE=$(PYTHON_IMAGE)) $(if $(UV_IMAGE),--build-arg UV_IMAGE=$(UV_IMAGE))"; \
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
		echo "docker build $$args -t $(IMAGE) ."; docker build $$args -t $(IMAGE) .; \
	elif command -v buildah >/dev/null 2>&1; then \
		echo "buildah bud --isolation chroot $$args -t $(IMAGE) ."; \
		buildah bud --isolation chroot $$args -t $(IMAGE) .; \
	else \
		echo "make image: needs docker (its daemon running) or buildah" >&2; exit 1; \
	fi
