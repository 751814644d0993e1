"""The broker's ceiling: what one job costs Redis, end to end, on near-zero-cost jobs.

    .venv/bin/python bench/bench_broker.py [--jobs 3000] [--concurrency N]

The real client (``FleetClient.submit_many``, its reply reader) and a real worker node
(Celery prefork, concurrency = cores) on one local redis-server, with jobs that cost the
worker almost nothing, so Redis and the transport are what is measured:

  * ``cache hit``: the same completion again and again with the result cache on: every job after
    the first is answered from the cache (no sandbox at all);
  * ``trivial program``: one hidden test of ``print(input())``, result cache off (a fork-server
    test, ~2 ms).

For each: jobs/s end to end (submit of the whole batch to the last result), Redis commands per
job by command (``INFO commandstats`` before/after: commands a Lua script runs are counted by
Redis too, listed under the script), bytes per job in and out of Redis (``INFO stats``), and
Redis CPU per 1k jobs (``INFO cpu``, user + sys). The worker's background (kombu's restore
sweeps, the client's claim renewals) is included: it is what a real run pays.

Split by side: the client's reply collection (``XREAD``, ``XTRIM``, and ``LRANGE``/``LTRIM`` of
its reply list) is counted apart, with the replies each read brought; the rest is the job's
cost on the worker side plus the publish (one ``LPUSH`` per 500 jobs). Replies batched many per
read (a busy client, a fleet answering faster than one read's round trip) make the collection
~0 per job, so the worker side is what one job costs Redis then.

The baseline, in the same run, is a worker with the settings this project had before the
broker's path was cut (``CPFLEET_BROKER_LEAN=0``); the ratio is commands per job before / after.
Also shown: the lean transport's BRPOP path (liveness off, ``CPFLEET_NODE_TTL=0``: kombu's
unacked hash written by plain pipelines, and no heartbeats), against the default path that pops
into the node's in-flight list (``workers/broker.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import redis  # noqa: E402
from procs import stop_process_group  # noqa: E402

from cpfleet.fleet.redis_server import RedisServer  # noqa: E402
from cpfleet.producer.client import FleetClient  # noqa: E402

ONE = {"id": "bench/broker-one", "hidden_tests": [{"input": "7\n", "output": "7\n"}]}
ECHO = "```python\nprint(input())\n```"


class Worker:
    def __init__(self, url: str, queue: str, concurrency: int, env: dict[str, str], log: Path) -> None:
        full = {**os.environ, "CPFLEET_REDIS_URL": url, "CPFLEET_QUEUES": queue,
                "CPFLEET_CONCURRENCY": str(concurrency), "CPFLEET_TASK_EVENTS": "0", "PYTHONPATH": str(REPO), **env}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "worker", "-P", "prefork",
             "-n", f"{queue}@localhost", "-l", "WARNING", "--without-gossip", "--without-mingle",
             "--without-heartbeat"],
            cwd=REPO, env=full, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def stop(self) -> None:
        stop_process_group(self.proc)


def snapshot(r: redis.Redis) -> dict[str, Any]:
    stats = r.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    s, cpu = r.info("stats"), r.info("cpu")
    return {"calls": calls, "in": int(s["total_net_input_bytes"]), "out": int(s["total_net_output_bytes"]),
            "cpu": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])}


def diff(a: dict[str, Any], b: dict[str, Any], n: int) -> dict[str, Any]:
    calls = {k: (v - a["calls"].get(k, 0)) / n for k, v in b["calls"].items() if v - a["calls"].get(k, 0) > 0}
    return {"calls": calls, "total": sum(calls.values()), "in": (b["in"] - a["in"]) / n,
            "out": (b["out"] - a["out"]) / n, "cpu_ms_per_1k": 1e6 * (b["cpu"] - a["cpu"]) / n}


def measure(r: redis.Redis, client: FleetClient, completion: str, n: int) -> dict[str, Any]:
    jobs = [(ONE["id"], completion)] * n
    client.gather(client.submit_many(jobs[:50]), timeout=600)  # warm: pool processes up, cache filled
    a = snapshot(r)
    t0 = time.perf_counter()
    results = client.gather(client.submit_many(jobs), timeout=3600)
    wall = time.perf_counter() - t0
    b = snapshot(r)
    bad = [x for x in results if x.reward != 1.0]
    if bad:
        raise SystemExit(f"benchmark job failed: {bad[0].verdict} {bad[0].infra_message}")
    out = diff(a, b, n)
    out["jobs_per_s"] = n / wall
    out["cache_hits"] = sum(x.cache_hit for x in results)
    return out


def requests_per_job(url: str, client: FleetClient, completion: str, n: int) -> tuple[float, float]:
    """(top-level commands per job, commands run by Lua scripts per job), from MONITOR on a
    separate sample: INFO commandstats counts both kinds together."""
    stop = threading.Event()
    counts = {"top": 0, "lua": 0}

    def watch(ready: threading.Event) -> None:
        with redis.Redis.from_url(url).monitor() as m:
            ready.set()
            while not stop.is_set():
                cmd = m.next_command()
                if cmd["command"].startswith("PING") or cmd["command"] == "MONITOR":
                    continue
                counts["lua" if cmd.get("client_type") == "lua" else "top"] += 1

    ready = threading.Event()
    t = threading.Thread(target=watch, args=(ready,), daemon=True)
    t.start()
    ready.wait(10)
    client.gather(client.submit_many([(ONE["id"], completion)] * n), timeout=3600)
    time.sleep(0.5)
    stop.set()
    redis.Redis.from_url(url).ping()  # wakes the monitor so it sees the stop
    t.join(10)
    return counts["top"] / n, counts["lua"] / n


# the client's reply collection (producer/replies.py): its stream and, once a second, its list
COLLECT = ("xread", "xtrim", "lrange", "ltrim")


def collection(m: dict[str, Any]) -> tuple[float, float]:
    """(reply collection commands per job, replies per stream read)."""
    calls = m["calls"]
    reads = calls.get("xread", 0.0)
    return sum(calls.get(c, 0.0) for c in COLLECT), (1.0 / reads if reads else 0.0)


def show(name: str, m: dict[str, Any]) -> None:
    collect, per_read = collection(m)
    print(f"  {name}: {m['jobs_per_s']:.0f} jobs/s, {m['total']:.2f} Redis commands/job "
          f"({m['top']:.2f} sent by clients + {m['lua']:.2f} run by scripts, MONITOR sample), "
          f"{m['in']:.0f} B in + {m['out']:.0f} B out per job, Redis CPU {m['cpu_ms_per_1k']:.0f} ms per 1k jobs"
          f" ({m['cache_hits']} cache hits)")
    if per_read:
        print(f"      = {m['total'] - collect:.2f} worker side and publish + {collect:.2f} reply collection "
              f"({per_read:.2f} replies per XREAD)")
    for cmd, per in sorted(m["calls"].items(), key=lambda kv: -kv[1]):
        if per >= 0.005:
            print(f"      {cmd:<14}{per:6.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--sample", type=int, default=300, help="jobs watched with MONITOR")
    ap.add_argument("--concurrency", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, env in (("before (CPFLEET_BROKER_LEAN=0)", {"CPFLEET_BROKER_LEAN": "0"}),
                           ("BRPOP path (CPFLEET_NODE_TTL=0)", {"CPFLEET_NODE_TTL": "0"}), ("now", {})):
            with RedisServer() as server:  # a Redis of its own: nothing else in its counters
                r = redis.Redis.from_url(server.url)
                w = Worker(server.url, "bench-broker", args.concurrency, env, Path(tmp) / f"{len(results)}.log")
                try:
                    with FleetClient(server.url, queue="bench-broker", use_cache=True, timeout=3600,
                                     max_in_flight=10**6) as cached, \
                            FleetClient(server.url, queue="bench-broker", use_cache=False, timeout=3600,
                                        max_in_flight=10**6) as fresh:
                        cached.register_problems([ONE])
                        for kind, client in (("cache hit", cached), ("trivial program", fresh)):
                            m = measure(r, client, ECHO, args.jobs)
                            m["top"], m["lua"] = requests_per_job(server.url, client, ECHO, args.sample)
                            results[f"{label}: {kind}"] = m
                finally:
                    w.stop()
    print(f"cpfleet broker benchmark: {args.jobs} jobs per kind, worker concurrency {args.concurrency}, "
          f"one redis-server, task events off")
    for name, m in results.items():
        show(name, m)
    for kind in ("cache hit", "trivial program"):
        before = results[f"before (CPFLEET_BROKER_LEAN=0): {kind}"]
        now = results[f"now: {kind}"]
        print(f"  {kind}: commands/job {before['total']:.2f} -> {now['total']:.2f} "
              f"(sent by clients {before['top']:.2f} -> {now['top']:.2f}) "
              f"(ratio {before['total'] / now['total']:.2f}x), jobs/s {before['jobs_per_s']:.0f} -> "
              f"{now['jobs_per_s']:.0f} ({now['jobs_per_s'] / before['jobs_per_s']:.2f}x), Redis CPU/1k jobs "
              f"{before['cpu_ms_per_1k']:.0f} -> {now['cpu_ms_per_1k']:.0f} ms   goal <= 6 commands/job "
              f"({'met' if now['total'] <= 6.0 else 'not met'}; worker side and publish "
              f"{now['total'] - collection(now)[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
