# syntax=docker/dockerfile:1
# The operator image: `make image` (docker, or buildah where no daemon runs), or
# `docker build -t dynamo-pool-operator:0.1.0 .`
#
# Two stages: the builder turns the source into a wheel and a virtualenv with exactly
# the versions in uv.lock (hash-checked); the runtime image gets only that virtualenv,
# no uv, no source tree. It runs the sources as the tests do
# (docs/decisions/0014-the-image-runs-the-sources.md). Both stages use the same Python
# base image, so the virtualenv's interpreter path is valid in the runtime stage.

ARG PYTHON_IMAGE=python:3.11-slim
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS builder
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY src ./src
# The runtime dependencies only (no dev group), pinned and hashed.
# `--python` names the virtualenv's interpreter: with UV_PYTHON set, uv pip ignores
# VIRTUAL_ENV and would install into the base image's Python (tests/e2e/test_image.py).
RUN uv export --frozen --no-dev --no-emit-project --format requirements-txt -o /tmp/requirements.txt \
 && uv build --wheel --out-dir /tmp/dist \
 && uv venv /opt/venv \
 && uv pip install --python /opt/venv/bin/python --require-hashes --compile-bytecode -r /tmp/requirements.txt \
 && uv pip install --python /opt/venv/bin/python --no-deps --compile-bytecode /tmp/dist/*.whl \
 && rm -r /opt/venv/lib/python3.*/site-packages/dynamo_pool_operator/localcluster
# The local control plane (`dev`, the tests, the benchmark) is left out: the operator never
# imports it (tests/unit/repository/test_image_contents.py), and `dev` says it needs a source checkout.

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="dynamo-pool-operator" \
      org.opencontainers.image.description="Makes NVIDIA Dynamo pools discoverable across clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /opt/venv /opt/venv
# Bytecode was compiled at build time: the root filesystem is read-only in the pod.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The chart runs as 65532 too (non-root, like distroless' "nonroot").
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["dynamo-pool-operator"]
CMD ["run"]
