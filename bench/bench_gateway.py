"""The HTTP gateway under trainer-shaped traffic, against a real fleet (redis-server, one
Celery prefork worker) and ``cpfleet serve`` as its own process.

    .venv/bin/python bench/bench_gateway.py [--problems 30] [--concurrency 64,512] [--batch 1000]

Work: real CodeContests problems and their human solutions (../shared/data/codecontests-300.jsonl,
the problems whose solution passes per docs/codecontests-human-solutions.json), else generated
problems. Every test of every problem is executed in each phase:

  native   the problems as judge jobs (FleetClient.submit_many, reward fraction, no result
           cache): the baseline, measured in the same run
  verl     one ``POST /run_code`` per test, as verl's sandbox_fusion utils send them (its
           payload; retried only on 504, 3 attempts), from C client threads, for each C
  judge    code-judge-shaped ``POST /judge/long-batch`` batches (judge_client.py: submissions of
           {type, solution, input, expected_output}, 4 batches at a time)

Each round runs every HTTP phase between two native phases (odd rounds in reverse order) and
compares it with the mean rate of those two: the machine may be shared, and load from elsewhere
then hits the pair alike. Every round's ratios are printed, then their medians, with goals:
  refused calls a client turns into a score  (verl: an error after its retries -> -1 -> a
      failed test; code-judge: internal_error; queue_timeout is resubmitted, not a score)  goal 0
  serve's own CPU / the fleet's CPU over the HTTP phases                                    goal <= 0.10
  per-test throughput through /run_code / the same tests as native jobs                    goal >= 0.8x
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from procs import children  # noqa: E402

from cpfleet.fleet.redis_server import RedisServer, free_port  # noqa: E402
from cpfleet.producer.client import FleetClient  # noqa: E402


def shared_data() -> Path:
    """``$CPFLEET_SHARED_DATA``, else the first ``shared/data`` beside the repository or one of
    its parents (as the tests find it)."""
    env = os.environ.get("CPFLEET_SHARED_DATA")
    candidates = ([Path(env)] if env else []) + [p / "shared" / "data" for p in REPO.parents]
    return next((c for c in candidates if c.is_dir()), candidates[0])


DATA = shared_data() / "codecontests-300.jsonl"
PASSING = REPO / "docs" / "codecontests-human-solutions.json"


def load_problems(n: int, generated: bool = False) -> tuple[list[dict[str, Any]], str]:
    for path in () if generated else (DATA,):
        if path.is_file():
            passing = set(json.loads(PASSING.read_text())["passing"]) if PASSING.exists() else None
            recs = [json.loads(line) for line in path.open()]
            recs = [r for r in recs if r.get("correct_solutions") and (passing is None or r["id"] in passing)]
            return recs[:n], f"CodeContests ({path})"
    gen = []
    for p in range(n):
        tests = [{"input": f"{i} {p}\n", "output": f"{i + p}\n"} for i in range(10)]
        gen.append({"id": f"gen/add{p}", "public_tests": tests[:2], "hidden_tests": tests[2:],
                    "correct_solutions": [f"a, b = map(int, input().split())\nprint(a + b)  # {p}\n"]})
    return gen, "generated a+b problems"


def fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def tests_of(rec: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["input"], t["output"]) for t in rec["public_tests"] + rec["hidden_tests"]]


# --- processes and their CPU -----------------------------------------------------------------


def tree_cpu(root: int) -> float:
    """CPU seconds of a process tree: each live process's own time plus what it reaped (so
    test processes that already exited count, through their parents)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
        todo += children(pid)
    return total


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit(f"{proc.args}: not ready:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


# --- the clients as they behave ------------------------------------------------------------------


def verl_call(url: str, code: str, stdin: str, timeout: int = 10) -> tuple[dict[str, Any] | None, str | None]:
    """verl's call_sandbox_api: its payload, 3 attempts, a 504 retried after 1 s then 2 s, any
    other error final; request timeout compile + run + 10 s."""
    data = json.dumps({"compile_timeout": timeout, "run_timeout": timeout, "code": code, "stdin": stdin,
                       "memory_limit_MB": 1024, "language": "python", "files": {}, "fetch_files": []}).encode()
    last = None
    for attempt in range(3):
        req = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=2 * timeout + 10) as resp:
                return json.loads(resp.read()), None
        except urllib.error.HTTPError as e:
            if e.code == 504:
                last = "504"
                if attempt < 2:
                    time.sleep(attempt + 1)
                continue
            return None, f"HTTP {e.code}"
        except (OSError, ValueError) as e:
            return None, f"{type(e).__name__}: {e}"
    return None, last


def post(url: str, payload: Any, timeout: float = 3600) -> Any:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def metric(base: str, name: str) -> float:
    """One counter from the gateway's /metrics."""
    with urllib.request.urlopen(base + "/metrics", timeout=30) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=30, help="problems (each with ~10 tests) per phase")
    ap.add_argument("--concurrency", default="64,512", help="verl client threads, comma-separated")
    ap.add_argument("--batch", type=int, default=1000, help="code-judge submissions per long-batch")
    ap.add_argument("--generated", action="store_true", help="generated a+b problems even when the shared data is there")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every phase")
    ap.add_argument("--coalesce-ms", type=float, default=None, help="serve's --coalesce-ms (default: serve's own)")
    ap.add_argument("--json", action="store_true", help="print the measurements as one JSON object too")
    args = ap.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    problems, source = load_problems(args.problems, args.generated)
    work = [(rec, code, stdin, out) for rec in problems for code in rec["correct_solutions"][:1]
            for stdin, out in tests_of(rec)]
    print(f"bench_gateway: {len(problems)} problems, {len(work)} tests per phase ({source}); "
          f"{len(os.sched_getaffinity(0))} CPUs, load {os.getloadavg()[0]:.1f}")
    out: dict[str, Any] = {"problems": len(problems), "tests": len(work), "source": source}

    with tempfile.TemporaryDirectory(prefix="cpfleet-bench-gw-") as tmp, RedisServer() as redis_server:
        logs = Path(tmp)
        url = redis_server.url
        env = {**os.environ, "CPFLEET_REDIS_URL": url, "CPFLEET_CONCURRENCY": "auto", "CPFLEET_TASK_EVENTS": "0",
               "PYTHONPATH": str(REPO)}
        worker = start([sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "worker", "-P", "prefork",
                        "-n", "bench-gw@localhost", "-l", "INFO", "--without-gossip", "--without-mingle",
                        "--without-heartbeat"], env, logs / "worker.log")
        port = free_port()
        serve_cmd = [sys.executable, "-m", "cpfleet", "serve", "--redis", url, "--port", str(port)]
        if args.coalesce_ms is not None:
            serve_cmd += ["--coalesce-ms", str(args.coalesce_ms)]
        serve = start(serve_cmd, env, logs / "serve.log")
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for(logs / "worker.log", "bench-gw@localhost ready", worker)
            wait_for(logs / "serve.log", "ready", serve)
            with FleetClient(url, use_cache=False, timeout=1800) as fleet:
                fleet.register_problems([{k: v for k, v in r.items() if k != "correct_solutions"} for r in problems])
                # warm every pool process (runner started, first compile done)
                fleet.gather(fleet.submit_many([(problems[0]["id"], fenced(problems[0]['correct_solutions'][0]))] * 4))
                for _ in range(4):
                    verl_call(base + "/run_code", "print(1)", "")

                def native_phase() -> dict[str, Any]:
                    c0, t0 = tree_cpu(worker.pid), time.perf_counter()
                    results = fleet.gather(fleet.submit_many(
                        [{"problem_id": r["id"], "completion": fenced(r["correct_solutions"][0])} for r in problems],
                        reward_shape="fraction"), timeout=3600)
                    wall, cpu = time.perf_counter() - t0, tree_cpu(worker.pid) - c0
                    ran = sum(r.public.run + r.hidden.run for r in results)
                    return {"wall_s": wall, "tests_run": ran, "tests_per_s": ran / wall, "fleet_cpu_s": cpu,
                            "infra_errors": sum(r.infra_error for r in results)}

                def verl_phase(conc: int) -> dict[str, Any]:
                    j0 = metric(base, "cpfleet_http_run_jobs_total")
                    h0 = metric(base, "cpfleet_http_run_groups_held_total")
                    s0, w0, t0 = tree_cpu(serve.pid), tree_cpu(worker.pid), time.perf_counter()
                    p0 = time.process_time()
                    with ThreadPoolExecutor(conc) as pool:
                        replies = list(pool.map(lambda w: verl_call(base + "/run_code", w[1], w[2]), work))
                    wall, client_cpu = time.perf_counter() - t0, time.process_time() - p0
                    serve_cpu, fleet_cpu = tree_cpu(serve.pid) - s0, tree_cpu(worker.pid) - w0
                    refused = [err for body, err in replies if body is None]
                    answered = [(body, w) for (body, _), w in zip(replies, work, strict=True) if body is not None]
                    passed = sum(1 for body, w in answered if body["status"] == "Success"
                                 and body["run_result"]["stdout"].rstrip("\n") == w[3].rstrip("\n"))
                    return {"run_jobs": metric(base, "cpfleet_http_run_jobs_total") - j0, "wall_s": wall,
                            "held": metric(base, "cpfleet_http_run_groups_held_total") - h0,
                            "tests_per_s": len(work) / wall, "serve_cpu_s": serve_cpu, "fleet_cpu_s": fleet_cpu,
                            "client_cpu_s": client_cpu,
                            "refused_scored": len(refused), "refusal_kinds": sorted(set(refused)),
                            "passed_verl_compare": passed}

                def codejudge_phase() -> dict[str, Any]:
                    subs = [{"type": "python", "solution": w[1], "input": w[2], "expected_output": w[3]} for w in work]
                    batches = [subs[i : i + args.batch] for i in range(0, len(subs), args.batch)]
                    j0 = metric(base, "cpfleet_http_run_jobs_total")
                    s0, w0, t0 = tree_cpu(serve.pid), tree_cpu(worker.pid), time.perf_counter()
                    with ThreadPoolExecutor(4) as pool:
                        answers = list(pool.map(
                            lambda b: post(base + "/judge/long-batch", {"type": "batch", "submissions": b}), batches))
                    wall = time.perf_counter() - t0
                    results_cj = [r for a in answers for r in a["results"]]
                    return {"run_jobs": metric(base, "cpfleet_http_run_jobs_total") - j0, "wall_s": wall,
                            "tests_per_s": len(subs) / wall, "serve_cpu_s": tree_cpu(serve.pid) - s0,
                            "fleet_cpu_s": tree_cpu(worker.pid) - w0, "success": sum(r["success"] for r in results_cj),
                            "refused_scored": sum(r["reason"] == "internal_error" for r in results_cj),
                            "queue_timeout": sum(r["reason"] == "queue_timeout" for r in results_cj)}

                # Each HTTP phase runs between two native phases and is compared with their mean
                # rate: a burst of load from elsewhere on the machine (it is shared) hits the pair
                # alike. Odd rounds run the HTTP phases in reverse order, so neither drift nor a
                # phase's position favours one of them. The ratio reported is the median over
                # rounds; every round's is printed.
                http_phases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                    (f"verl_{c}", functools.partial(verl_phase, c)) for c in concurrencies]
                http_phases.append(("codejudge", codejudge_phase))
                rounds: list[dict[str, Any]] = []
                for i in range(args.rounds):
                    natives = [native_phase()]
                    rd: dict[str, Any] = {"natives": natives}
                    for name, phase in http_phases if i % 2 == 0 else http_phases[::-1]:
                        ph = phase()
                        natives.append(native_phase())
                        ph["native_tests_per_s"] = (natives[-2]["tests_per_s"] + natives[-1]["tests_per_s"]) / 2
                        ph["ratio"] = ph["tests_per_s"] / ph["native_tests_per_s"]
                        rd[name] = ph
                    rounds.append(rd)
                    print(f"  round {i + 1}: native " + ", ".join(f"{n['tests_per_s']:.0f}" for n in natives)
                          + " tests/s; " + "; ".join(f"{name} {rd[name]['tests_per_s']:.0f} tests/s "
                                                      f"({rd[name]['run_jobs']:.0f} run jobs"
                                                      + (f", {rd[name]['held']:.0f} held" if "held" in rd[name] else "")
                                                      + f") = {rd[name]['ratio']:.2f}x"
                                                      for name, _ in http_phases), flush=True)
            out["rounds"] = rounds
            out["phases"] = {}
            for name, _ in http_phases:
                ratios = [rd[name]["ratio"] for rd in rounds]
                out["phases"][name] = {
                    "ratio_median": statistics.median(ratios), "ratios": ratios,
                    "tests_per_s_median": statistics.median(rd[name]["tests_per_s"] for rd in rounds),
                    "run_jobs": [rd[name]["run_jobs"] for rd in rounds],
                    **{key: sum(rd[name][key] for rd in rounds)
                       for key in ("serve_cpu_s", "fleet_cpu_s", "refused_scored")},
                }
            natives_all = [n for rd in rounds for n in rd["natives"]]
            out["native"] = {"tests_per_s_median": statistics.median(n["tests_per_s"] for n in natives_all),
                             "tests_per_s_range": [min(n["tests_per_s"] for n in natives_all),
                                                   max(n["tests_per_s"] for n in natives_all)],
                             "tests_run": natives_all[0]["tests_run"],
                             "infra_errors": sum(n["infra_errors"] for n in natives_all)}
        finally:
            stop(serve)
            stop(worker)

    native = out["native"]
    lo, hi = native["tests_per_s_range"]
    print(f"  native jobs            {native['tests_run']} tests per phase: median {native['tests_per_s_median']:.0f} "
          f"tests/s (range {lo:.0f} to {hi:.0f} over {len(out['rounds']) * len(out['phases']) + len(out['rounds'])} phases)")
    for name, ph in out["phases"].items():
        print(f"  {name:<22} median {ph['tests_per_s_median']:.0f} tests/s, run jobs per round "
              f"{', '.join(f'{j:.0f}' for j in ph['run_jobs'])}; serve CPU {ph['serve_cpu_s']:.2f} s, "
              f"fleet CPU {ph['fleet_cpu_s']:.2f} s (all rounds); refused->score {ph['refused_scored']}")
    phases = list(out["phases"].values())
    refused = sum(ph["refused_scored"] for ph in phases)
    serve_share = sum(ph["serve_cpu_s"] for ph in phases) / max(1e-9, sum(ph["fleet_cpu_s"] for ph in phases))
    print(f"refused calls a client turns into a score (all rounds): {refused}  (goal 0)")
    print(f"serve CPU / fleet CPU over the HTTP phases (all rounds): {serve_share:.3f}  (goal <= 0.10)")
    for name, ph in out["phases"].items():
        goal = "  (goal >= 0.8x)" if name.startswith("verl_") else ""
        print(f"per-test throughput {name} / native jobs beside it: median {ph['ratio_median']:.2f}x, rounds "
              + ", ".join(f"{r:.2f}" for r in ph["ratios"]) + goal)
    out["summary"] = {"refused_scored": refused, "serve_cpu_share": serve_share,
                      "throughput_ratio_median": {name: ph["ratio_median"] for name, ph in out["phases"].items()}}
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
