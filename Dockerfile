# The cpfleet worker image (also runs Flower: same code, same Celery app).
#
#   docker build -t cpfleet-worker .
#   docker compose up -d --scale worker=4          # see docker-compose.yml
#
# The worker must run as root *inside* the container: the sandbox needs root (with the few
# capabilities docker-compose.yml grants) to create namespaces and to drop each test program
# to its own unprivileged uid. Untrusted code never runs as root: see README "Security model".
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# tini: PID 1 that forwards SIGTERM to Celery (warm shutdown) and reaps orphans.
# mount (util-linux): the entrypoint's cgroup setup.
# The solution toolchains (README "Languages"): g++ and gcc (C, C++), a headless JDK (Java),
# pypy3 (Python at PyPy speed); the worker reports at start which ones it found.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini mount g++ gcc libc6-dev default-jdk-headless pypy3 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/cpfleet
# Dependencies first (cached while only the code changes): install the project's declared
# dependencies from pyproject.toml without the code, then the code itself.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print(chr(10).join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt
COPY cpfleet ./cpfleet
COPY core ./core
COPY sandbox ./sandbox
COPY workers ./workers
COPY producer ./producer
RUN pip install --no-deps . && python -c "import cpfleet.workers.config, cpfleet.sandbox.runners, cpfleet.producer.client"

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
