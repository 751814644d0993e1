# The cpfleet worker image (also runs Flower: same code, same Celery app).
#
#   docker build -t cpfleet-worker .
#   docker compose up -d --scale worker=4          # see docker-compose.yml, docs/deployment.md
#
# Build arguments (all optional):
#   BASE_IMAGE      any Debian-based image with apt (default python:3.11-slim-bookworm). A plain
#                   Debian bookworm (e.g. one made with debootstrap and `docker import`, where no
#                   registry is reachable: scripts/test-containers) works too: what Python the base
#                   lacks is installed from its apt sources, and the code runs from a venv either way.
#   EXTRA_CA_DIR    a folder inside the build context whose *.crt files pip trusts while building
#                   (networks that re-sign TLS). Default docker/ca-certificates (empty in git).
#                   Build time only: the runtime stage does not carry them.
#   PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST   a package mirror, passed to pip.
#
# Two stages: the builder installs the project into a venv (/opt/cpfleet/venv); the runtime stage
# copies only that venv on top of the toolchains, so no pip cache, no build frontend and no source
# folder is left in the image. No source folder in the working directory matters: a ./cpfleet
# folder there would shadow the installed package (whose subpackages come from core/, sandbox/,
# workers/ and producer/, see pyproject.toml) and `import cpfleet.workers` would fail.
#
# The worker must run as root *inside* the container: the sandbox needs root (with the few
# capabilities docker-compose.yml grants) to create namespaces and to drop each test program
# to its own unprivileged uid. Untrusted code never runs as root: see docs/security.md.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS builder
ARG EXTRA_CA_DIR=docker/ca-certificates
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
# Python >= 3.11 with venv (a python:3.11 base has it; a Debian bookworm base gets python3 from apt),
# the CA store, and the extra CAs on top of it for pip (which otherwise trusts only its own bundle).
COPY ${EXTRA_CA_DIR}/ /tmp/extra-ca/
RUN set -eu; \
    pkgs=ca-certificates; \
    python3 -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11)' 2>/dev/null \
        || pkgs="$pkgs python3 python3-venv"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*; \
    find /tmp/extra-ca -name '*.crt' -exec cp {} /usr/local/share/ca-certificates/ \; ; \
    update-ca-certificates; \
    python3 -m venv /opt/cpfleet/venv
ENV PATH=/opt/cpfleet/venv/bin:$PATH
WORKDIR /src
# Dependencies first (cached while only the code or the README changes): the project's declared
# dependencies from pyproject.toml, then the code itself, installed (not editable) into the venv.
COPY pyproject.toml ./
RUN python -c "import tomllib; print(chr(10).join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt
COPY README.md ./
COPY cpfleet ./cpfleet
COPY core ./core
COPY sandbox ./sandbox
COPY workers ./workers
COPY producer ./producer
RUN pip install --no-deps . \
    && cd / && python -c "import cpfleet.workers.config, cpfleet.sandbox.runner, cpfleet.producer.client"


FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# tini: PID 1 that forwards SIGTERM to Celery (warm shutdown) and reaps orphans.
# mount (util-linux): the entrypoint's cgroup setup.
# The solution toolchains (docs/languages.md): g++ and gcc (C, C++), a headless JDK (Java),
# pypy3 (Python at PyPy speed); the worker reports at start which ones it found.
# python3: the venv's interpreter, where the base has none (the same apt sources as the builder's,
# so the same version).
RUN set -eu; \
    pkgs="tini mount g++ gcc libc6-dev default-jdk-headless pypy3"; \
    python3 -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null || pkgs="$pkgs python3"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY --from=builder /opt/cpfleet/venv /opt/cpfleet/venv
ENV PATH=/opt/cpfleet/venv/bin:$PATH
WORKDIR /opt/cpfleet
# The import check runs from the working directory the worker starts in: what it imports is the
# installed package, as the worker and the healthcheck will.
RUN python -c "import cpfleet.workers.config, cpfleet.workers.app, cpfleet.sandbox.runner, cpfleet.producer.client" \
    && cpfleet --help >/dev/null

# testlib.h for checker programs (checker type "testlib", and Codeforces-derived problems whose
# checker does not ship it in its "files"): the image does not carry it. The operator provides
# it (MIT, github.com/MikeMirzayanov/testlib) as a read-only mount and names the folder:
#   docker run -v /srv/testlib:/opt/testlib:ro -e CPFLEET_TESTLIB_DIR=/opt/testlib cpfleet-worker
# (docker-compose: the same two lines under the worker's volumes/environment), or bakes it into
# a derived image:
#   FROM cpfleet-worker
#   COPY testlib.h /opt/testlib/testlib.h
#   ENV CPFLEET_TESTLIB_DIR=/opt/testlib
# Without it, a checker that includes testlib.h fails to compile: its problem's jobs come back
# INTERNAL (infra_error, reward None) saying so, never a 0.

COPY docker/entrypoint.sh /usr/local/bin/cpfleet-entrypoint
RUN chmod 0755 /usr/local/bin/cpfleet-entrypoint

# Prometheus endpoint of the worker (CPFLEET_METRICS_PORT; off unless set) and Flower.
EXPOSE 9808 5555
ENTRYPOINT ["tini", "--", "cpfleet-entrypoint"]
CMD ["cpfleet", "worker", "-n", "cpfleet@%h"]
