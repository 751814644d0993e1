"""How fast the jobs of a client that went away leave the queue.

    .venv/bin/python bench/bench_withdrawn.py [--jobs 3000] [--concurrency 2]

1. sweep: a client queues ``--jobs`` jobs (no worker running) and closes; ``close()`` sweeps
   them out of the queue inside Redis (``cpfleet.producer.orphans``): its duration is printed.
2. worker check: a client process queues ``--jobs`` jobs and dies without closing (its claim
   TTL shortened to 2 s); once the claim lapsed, one prefork node starts on that queue and the
   time until the queue is empty is measured, with the count of jobs it judged (must be 0: each
   is dropped before anything runs) and the count it logged as withdrawn. This is the path for
   what no sweep reached.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from cpfleet.core import protocol  # noqa: E402
from cpfleet.core.store import register_problems  # noqa: E402
from cpfleet.fleet.redis_server import RedisServer  # noqa: E402
from cpfleet.producer.client import FleetClient  # noqa: E402

ECHO = {"id": "bench/echo", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "2\n", "output": "2\n"}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=2)
    args = ap.parse_args()
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        r = redis.Redis.from_url(server.url)
        register_problems(r, [ECHO])
        queue = "bench-withdrawn"
        code = "```python\nprint(input())\n```"
        with FleetClient(server.url, queue=queue, timeout=3600, max_in_flight=10**7) as client:
            client.submit_many([(ECHO["id"], code)] * args.jobs)
            assert r.llen(queue) == args.jobs
            t0 = time.monotonic()
        print(f"sweep: close() took {args.jobs - r.llen(queue)} of {args.jobs} queued jobs back in {time.monotonic() - t0:.2f} s")
        crash = (
            "import os\nfrom cpfleet.core import protocol\nprotocol.CLIENT_CLAIM_TTL_S = 2\n"
            "from cpfleet.producer.client import FleetClient\n"
            f"c = FleetClient({server.url!r}, queue={queue!r}, client_id='crashed', timeout=3600, max_in_flight=10**7)\n"
            f"c.submit_many([({ECHO['id']!r}, {code!r})] * {args.jobs})\nos._exit(0)\n"
        )
        subprocess.run([sys.executable, "-c", crash], cwd=REPO, check=True)
        while r.exists(protocol.client_claim_key("crashed")):
            time.sleep(0.1)
        assert r.llen(queue) == args.jobs
        log_path = Path(tmp) / "worker.log"
        env = {**os.environ, "CPFLEET_REDIS_URL": server.url, "CPFLEET_QUEUES": queue, "CPFLEET_TASK_EVENTS": "0"}
        argv = [sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "worker", "-P", "prefork",
                "-c", str(args.concurrency), "-n", "bench@localhost", "-l", "INFO",
                "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
        with log_path.open("ab") as log:
            proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                while "bench@localhost ready." not in log_path.read_text(errors="replace"):
                    time.sleep(0.05)
                t0 = time.monotonic()
                while r.llen(queue) > 0:
                    time.sleep(0.01)
                wall = time.monotonic() - t0
            finally:
                proc.terminate()
                proc.wait(timeout=60)
        events = [json.loads(x) for x in log_path.read_text(errors="replace").splitlines() if x.startswith('{"event"')]
        judged = sum(e["event"] == "job_done" for e in events)
        withdrawn = sum(e["event"] == "job_withdrawn" for e in events)
        print(
            f"worker check: {args.jobs} orphaned jobs cleared by {args.concurrency} pool processes in {wall:.2f} s "
            f"({args.jobs / wall:,.0f} jobs/s); judged {judged}, logged withdrawn {withdrawn}"
        )


if __name__ == "__main__":
    main()
