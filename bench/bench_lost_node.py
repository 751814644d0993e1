"""How long the jobs of a lost worker node take to come back: one of two nodes SIGKILLed mid-batch.

    .venv/bin/python bench/bench_lost_node.py [--jobs 40] [--sleep 2] [--node-ttl 10] [--concurrency 1]

Two real prefork nodes (``cpfleet worker``, production time limits: visibility timeout 690 s)
judge ``--jobs`` jobs that each hold their pool process ``--sleep`` seconds (a program that
sleeps half of it in each of its two tests). Once the first node lists a held job in its heartbeat, its whole process group is
SIGKILLed (a crashed host). Printed: when the jobs it held were answered, counted from the kill
(the liveness sweep, ``cpfleet.workers.liveness``, requeues them once the node's heartbeat
expired: ``--node-ttl`` seconds), against the 690 s kombu's visibility timeout alone would take;
when the whole batch finished; and that every job was answered exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from cpfleet.core import protocol  # noqa: E402
from cpfleet.fleet.redis_server import RedisServer  # noqa: E402
from cpfleet.producer.client import FleetClient  # noqa: E402


def echo_problem(sleep_s: float) -> dict[str, object]:
    """Two tests, and a time limit (CPU seconds) the sleeping program stays far under."""
    return {"id": "bench/lost-echo", "time_limit_s": sleep_s + 10,
            "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "2\n", "output": "2\n"}]}


def sleeping_code(sleep_s: float) -> str:
    return f"```python\nimport time\ntime.sleep({sleep_s / 2!r})\nprint(input())\n```"
VISIBILITY_S = 690


def start_node(url: str, name: str, concurrency: int, ttl: float, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CPFLEET_NODE_TTL": str(ttl), "CPFLEET_TASK_EVENTS": "0"}
    argv = [sys.executable, "-m", "cpfleet", "worker", "--redis", url, "-c", str(concurrency), "-n", name, "-l", "INFO"]
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(name: str, log: Path, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while f"{name} ready." not in log.read_text(errors="replace"):
        if time.monotonic() > end:
            raise SystemExit(f"node {name} not ready:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


def held_jobs(r: redis.Redis, name: str) -> set[str]:
    """The job ids whose messages node ``name`` lists in its heartbeat."""
    jobs = set()
    for field, value in r.hgetall(protocol.nodes_key()).items():
        if not field.decode().startswith(name + "/"):
            continue
        tags = set(value.decode().split()[1:])
        for tag in tags:  # kombu's unacked hash: the stock transport
            raw = r.hget(protocol.KOMBU_UNACKED_KEY, tag)
            if raw:
                wire_id = json.loads(raw)[0]["headers"]["id"]
                jobs.add(wire_id.split("/", 1)[0])
        for raw in r.lrange(protocol.inflight_key(field.decode()), 0, -1):  # the lean transport
            message = json.loads(raw)
            if message["properties"]["delivery_tag"] in tags:
                jobs.add(message["headers"]["id"].split("/", 1)[0])
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--sleep", type=float, default=2.0, help="seconds each job holds its pool process")
    ap.add_argument("--node-ttl", type=float, default=10.0, help="CPFLEET_NODE_TTL of both nodes (production default 10)")
    ap.add_argument("--concurrency", type=int, default=1)
    args = ap.parse_args()
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        r = redis.Redis.from_url(server.url)
        names = [f"bench-victim@{os.getpid()}", f"bench-survivor@{os.getpid()}"]
        logs = [Path(tmp) / f"{i}.log" for i in range(2)]
        nodes = [start_node(server.url, n, args.concurrency, args.node_ttl, log) for n, log in zip(names, logs, strict=True)]
        try:
            for name, log in zip(names, logs, strict=True):
                wait_ready(name, log)
            with FleetClient(server.url, timeout=VISIBILITY_S + 300, use_cache=False) as client:
                client.register_problems([echo_problem(args.sleep)])
                answered: dict[str, float] = {}
                code = sleeping_code(args.sleep)
                jobs = [{"problem_id": "bench/lost-echo", "completion": code, "job_id": f"j{i}"} for i in range(args.jobs)]
                futures = client.submit_many(jobs)
                for f in futures:
                    f.add_done_callback(lambda f: answered.setdefault(f.result().job_id, time.monotonic()))
                held: set[str] = set()
                end = time.monotonic() + 300
                while not held and time.monotonic() < end:
                    held = held_jobs(r, names[0])
                    time.sleep(0.05)
                if not held:
                    raise SystemExit("the first node never listed a held job")
                os.killpg(nodes[0].pid, signal.SIGKILL)
                killed = time.monotonic()
                nodes[0].wait()
                results = client.gather(futures, timeout=VISIBILITY_S + 300)
                finished = time.monotonic() - killed
                duplicates = client.stats.duplicates
            ids = [res.job_id for res in results]
            ok = sum(1 for res in results if res.reward == 1.0)
            back = max(answered[j] for j in held) - killed
            print(f"lost node: the {len(held)} job(s) it held were answered {back:.1f} s after the SIGKILL "
                  f"(node TTL {args.node_ttl:g} s; kombu's visibility timeout alone: {VISIBILITY_S} s, "
                  f"{VISIBILITY_S / back:.0f}x longer)")
            print(f"batch: {len(results)} jobs, {ok} OK, finished {finished:.1f} s after the kill; "
                  f"answered once each: {len(set(ids)) == len(ids) == args.jobs}; duplicate replies dropped: {duplicates}")
        finally:
            for node in nodes:
                try:
                    os.killpg(node.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            for node in nodes:
                try:
                    node.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(node.pid, signal.SIGKILL)
                    node.wait()


if __name__ == "__main__":
    main()
