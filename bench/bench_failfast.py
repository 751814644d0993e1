"""Fail-fast test order and hidden mode: CPU per wrong completion against file order in full mode, same run.

Three real workers on one Redis judge the same wrong completions at the same time: one with
``CPFLEET_FAIL_FAST=0`` in full mode (public tests, then hidden tests in file order: the
baseline, what a trainer got before hidden mode), one with the default (most-often-failed hidden
tests first, learnt from the fleet's own results) in full mode, and one with the default in
hidden mode (the hidden tests alone, in the learnt order: what the reward-only adapters run; the
two learnt workers share the counts, as a fleet's workers do). The completions are
LLM-style mutants of real correct programs (``bench/wrong_completions.py``: off-by-one bounds,
flipped comparisons, a wrong special case, too slow on the large test) plus the problems' own
wrong solutions where a set has them. Per problem and kind the wrong completions alternate between
two halves: the first warms the counts (judged by the fail-fast worker only), the second is
measured on both workers, so the order is learnt from other completions than the ones it is
measured on (as in training, where a group's completions share blind spots).

Reported per set and per mutant kind, for the completions that are wrong (reward 0):
  * the test programs' CPU per wrong completion (sum of ``timings.cpu_ms``), file vs learnt order;
  * tests run per wrong completion;
  * each worker's whole process tree CPU (celery, pool process, zygote, test processes) per
    measured job;
  * then the three against the baseline: learnt order in full mode, learnt order in hidden mode.
Rewards must be identical job for job across the three (the run fails loudly if one differs; a
stop at a public test's limit in full mode is reported, not failed: hidden mode runs no public
test, so it judges such a program on the hidden tests alone, the tests full mode rewards); verdicts that
differ (a different failing test found first, e.g. TIME_LIMIT instead of WRONG_ANSWER) are
counted. Goal: >= 2x less CPU per wrong completion once the counts have warmed, 0 reward changes.

Sets: the shipped demo problems (always), the shared ICPC/Kattis and CodeContests problems
(``icpc-kattis-31.jsonl.gz``, ``codecontests-300.jsonl`` in ``CPFLEET_SHARED_DATA`` or a
``shared/data`` folder above the repository; each skipped, saying so, when absent). The result cache is off: every job really runs.

    .venv/bin/python bench/bench_failfast.py [--limit 300] [--per-kind 2] [--no-slow]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import redis  # noqa: E402
import wrong_completions  # noqa: E402
from procs import children, shared_file, stop_process_group  # noqa: E402

from cpfleet.core.results import JobResult  # noqa: E402
from cpfleet.core.store import register_problems  # noqa: E402
from cpfleet.core.verdict import Verdict  # noqa: E402
from cpfleet.fleet.redis_server import RedisServer  # noqa: E402
from cpfleet.producer.client import FleetClient  # noqa: E402


def demo_records() -> list[dict[str, Any]]:
    with gzip.open(REPO / "cpfleet" / "demo" / "data" / "demo-problems.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def codecontests_records(limit: int) -> list[dict[str, Any]] | None:
    path = shared_file("codecontests-300.jsonl")
    if path is None:
        return None
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:limit]
    return [r for r in records if r.get("correct_solutions") and r.get("hidden_tests")]


def kattis_records(with_tle: bool, time_scale: float) -> list[dict[str, Any]] | None:
    """The ICPC/Kattis problems with a stated time limit, not interactive, each with its jury's
    wrong submissions (and time-limit ones when asked) as ``wrong``, in every language. Time
    limits are scaled by ``time_scale``: Kattis runs Python 3 with PyPy and the jury sized the
    limits for that, so its Python solutions sit near the limit under CPython."""
    path = shared_file("icpc-kattis-31.jsonl.gz")
    if path is None:
        return None
    with gzip.open(path, "rt") as f:
        records = [json.loads(line) for line in f if line.strip()]
    bad = {"wrong_answer", "run_time_error"} | ({"time_limit_exceeded"} if with_tle else set())
    out = []
    for r in records:
        if r["checker"]["type"] == "interactive" or r.get("time_limit_s") is None:
            continue
        subs = r.get("submissions") or []
        r["time_limit_s"] = float(r["time_limit_s"]) * time_scale
        r["correct_solutions"] = [s["source"] for s in subs if s["language"] == "python3" and s["expected"] == "accepted"]
        r["correct_languages"] = ["python3"] * len(r["correct_solutions"])
        if not r["correct_solutions"]:  # a correct program of the jury's in another language
            acc = [s for s in subs if s["expected"] == "accepted"]
            r["correct_solutions"] = [acc[0]["source"]] if acc else []
            r["correct_languages"] = [acc[0]["language"]] if acc else []
        r["wrong"] = [(f"jury-{s['language']}", s["language"], s["source"]) for s in subs if s["expected"] in bad]
        r["mutate"] = r["correct_languages"][:1] == ["python3"]
        if r["correct_solutions"]:
            out.append(r)
    return out


JOB_FIELDS = ("problem_id", "completion", "language")


def fence(code: str, language: str = "python3") -> str:
    if language != "python3":
        tag = {"cpp": "cpp", "c": "c", "java": "java"}[language]
        mark = "````" if "```" in code else "```"
        return f"{mark}{tag}\n{code.rstrip()}\n{mark}"
    return f"```python\n{code}\n```"


def jobs_for(records: list[dict[str, Any]], per_kind: int, kinds: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(warm-up jobs, measured jobs): each problem's wrong completions of each kind alternate
    between the two, so the order is learnt from other programs than those measured."""
    warm: list[dict[str, Any]] = []
    measured: list[dict[str, Any]] = []
    for r in records:
        largest = max(len(t["input"]) for t in r["public_tests"] + r["hidden_tests"])
        found: list[tuple[str, str, str]] = []
        if r.get("mutate", True):
            found += [(kind, "python3", comp) for kind, _, comp in
                      wrong_completions.completions(r["correct_solutions"][0], largest, per_kind, kinds)]
        found += [("own-wrong", "python3", fence(code)) for code in r.get("incorrect_solutions") or []]
        found += [(kind, lang, fence(code, lang)) for kind, lang, code in r.get("wrong") or []]
        seen: dict[str, int] = defaultdict(int)
        for kind, lang, comp in found:  # alternate within each kind: both halves have every kind
            (warm if seen[kind] % 2 == 0 else measured).append({"problem_id": r["id"], "completion": comp,
                                                                "kind": kind, "language": lang})
            seen[kind] += 1
    return warm, measured


class Worker:
    def __init__(self, url: str, queue: str, fail_fast: bool, log: Path) -> None:
        self.queue = queue
        env = {
            **os.environ,
            "CPFLEET_REDIS_URL": url,
            "CPFLEET_QUEUES": queue,
            "CPFLEET_CONCURRENCY": "1",
            "CPFLEET_TASK_EVENTS": "0",
            "CPFLEET_RESULT_CACHE": "0",
            "CPFLEET_FAIL_FAST": "1" if fail_fast else "0",
            "PYTHONPATH": str(REPO),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "worker", "-P", "prefork",
             "-n", f"{queue}@localhost", "-l", "WARNING", "--without-gossip", "--without-mingle",
             "--without-heartbeat"],
            cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def cpu_s(self) -> float:
        """CPU seconds of the worker's whole live tree, reaped descendants included."""
        tick = os.sysconf("SC_CLK_TCK")
        total, todo = 0.0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
                todo += children(pid)
            except OSError:
                continue
        return total

    def stop(self) -> None:
        stop_process_group(self.proc)


LIMITS = frozenset({Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT, Verdict.OUTPUT_LIMIT})


def tests_run(r: JobResult) -> int:
    return r.public.run + r.hidden.run


def recheck(c_off: FleetClient, c_on: FleetClient, jobs: list[dict[str, Any]], off: list[JobResult],
            on: list[JobResult]) -> list[int]:
    """Indices whose reward differs between the baseline and another worker (``c_on``, in its
    client's mode) for a reason the order could cause. A stop at a public test cannot be (public
    tests run first, in file order, in full mode; hidden mode runs none, and rewards the hidden
    tests alone); the others are judged again twice on each worker, and a program whose reward
    changes on either worker alone sits at a limit (CPU time near the time limit on a loaded
    machine): flaky, not an order effect. The rest are returned."""
    changed = [i for i, (a, b) in enumerate(zip(off, on, strict=True)) if a.reward != b.reward]
    public_stop = [i for i in changed if "public test" in off[i].stopped + on[i].stopped]
    for i in public_stop:
        print(f"   at a limit on a public test ({on[i].mode} mode on {c_on.queue}): {jobs[i]['problem_id']} "
              f"{jobs[i]['kind']}: {off[i].verdict} {off[i].stopped[:70]!r} / {on[i].reward} {on[i].verdict} "
              f"{on[i].stopped[:70]!r}")
    changed = [i for i in changed if i not in public_stop]
    if not changed:
        return []
    again_jobs = [{k: jobs[i][k] for k in JOB_FIELDS} for i in changed] * 2
    f_off, f_on = c_off.submit_many(again_jobs), c_on.submit_many(again_jobs)
    a_off, a_on = FleetClient.gather(f_off, timeout=7200), FleetClient.gather(f_on, timeout=7200)
    n = len(changed)
    flaky = [i for k, i in enumerate(changed)
             if len({off[i].reward, a_off[k].reward, a_off[n + k].reward}) > 1
             or len({on[i].reward, a_on[k].reward, a_on[n + k].reward}) > 1]
    for i in flaky:
        print(f"   flaky (one worker disagrees with itself): {jobs[i]['problem_id']} {jobs[i]['kind']}: "
              f"{off[i].verdict} / {on[i].verdict}")
    return [i for i in changed if i not in flaky]


def hidden_cpu(r: JobResult) -> float:
    """The CPU of the hidden tests alone (the part the order decides): the job's test CPU less
    its public tests' (each public test is reported with its CPU)."""
    return r.timings.cpu_ms - sum(t.cpu_ms for t in r.public.tests)


def report_hidden(name: str, measured: list[dict[str, Any]], off: list[JobResult], on: list[JobResult],
                  hid: list[JobResult], cpu: tuple[float, float, float], changed_idx: list[int]) -> None:
    """The three workers against the baseline (file order, full mode), on the completions wrong
    on all three: test CPU, tests run, and worker tree CPU per measured job."""
    changed = [(measured[i], off[i], hid[i]) for i in changed_idx]
    verdicts = sum(a.verdict != c.verdict for a, c in zip(off, hid, strict=True))
    print(f"\n== {name}, hidden mode (learnt order; public tests only after the hidden ones pass): {len(changed)} reward changes against the "
          f"baseline, {verdicts} verdicts differ, {sum(r.infra_error for r in hid)} infrastructure errors")
    for j, a, c in changed[:5]:
        print(f"   REWARD CHANGED {j['problem_id']} {j['kind']}: file/full {a.reward} {a.verdict} / "
              f"learnt/hidden {c.reward} {c.verdict}")
    by_kind: dict[str, list[tuple[JobResult, JobResult, JobResult]]] = defaultdict(list)
    for j, a, b, c in zip(measured, off, on, hid, strict=True):
        if a.reward == b.reward == c.reward == 0.0 and not (a.infra_error or b.infra_error or c.infra_error):
            by_kind[j["kind"]].append((a, b, c))
            by_kind["all wrong"].append((a, b, c))
            if not any(r.verdict in LIMITS for r in (a, b, c)):
                # a limit costs the limit in any order and mode: this row shows the rest
                by_kind["no limit hit"].append((a, b, c))
    print("   per wrong completion, against the baseline (file order, full mode): learnt order in full mode, "
          "learnt order in hidden mode")
    print(f"   {'kind':<13}{'wrong':>5}{'CPU ms file/full':>17}{'learnt/full':>12}{'ratio':>7}{'learnt/hidden':>14}"
          f"{'ratio':>7}{'tests file/full':>16}{'learnt/full':>12}{'ratio':>7}{'learnt/hidden':>14}{'ratio':>7}")
    for kind, triples in sorted(by_kind.items(), key=lambda kv: (kv[0] != "all wrong", kv[0] != "no limit hit")):
        n = len(triples)
        c0, c1, c2 = (sum(t[k].timings.cpu_ms for t in triples) / n for k in range(3))
        t0, t1, t2 = (sum(tests_run(t[k]) for t in triples) / n for k in range(3))
        print(f"   {kind:<13}{n:>5}{c0:>17.1f}{c1:>12.1f}{c0 / max(c1, 1e-9):>6.2f}x{c2:>14.1f}"
              f"{c0 / max(c2, 1e-9):>6.2f}x{t0:>16.2f}{t1:>12.2f}{t0 / max(t1, 1e-9):>6.2f}x{t2:>14.2f}"
              f"{t0 / max(t2, 1e-9):>6.2f}x")
    n = len(measured)
    if n:
        per = [1000 * c / n for c in cpu]
        print(f"   worker tree CPU per measured job (all {n}): file/full {per[0]:.1f} ms, learnt/full {per[1]:.1f} ms "
              f"({cpu[0] / max(cpu[1], 1e-9):.2f}x), learnt/hidden {per[2]:.1f} ms ({cpu[0] / max(cpu[2], 1e-9):.2f}x)")
    if changed:
        raise SystemExit(f"{name}: {len(changed)} rewards changed in hidden mode")


def report(name: str, measured: list[dict[str, Any]], off: list[JobResult], on: list[JobResult],
           cpu_off: float, cpu_on: float, changed_idx: list[int]) -> None:
    changed = [(measured[i], off[i], on[i]) for i in changed_idx]
    infra = sum(r.infra_error for r in off + on)
    verdicts = sum(a.verdict != b.verdict for a, b in zip(off, on, strict=True))
    print(f"\n== {name}: {len(measured)} measured jobs, {infra} infrastructure errors, "
          f"{len(changed)} reward changes, {verdicts} verdicts differ (another failing test found first)")
    for j, a, b in changed[:5]:
        print(f"   REWARD CHANGED {j['problem_id']} {j['kind']}: file {a.reward} {a.verdict} / learnt {b.reward} {b.verdict}")
    by_kind: dict[str, list[tuple[JobResult, JobResult]]] = defaultdict(list)
    for j, a, b in zip(measured, off, on, strict=True):
        if a.reward == 0.0 and b.reward == 0.0 and not a.infra_error and not b.infra_error:
            by_kind[j["kind"]].append((a, b))
            by_kind["all wrong"].append((a, b))
    print("   per wrong completion: test CPU (all tests; hidden tests only, the part the order decides), "
          "tests run (all; hidden only), and the best any order could do (its failing test first)")
    print(f"   {'kind':<13}{'wrong':>5}{'CPU ms file':>12}{'learnt':>8}{'ratio':>7}{'hidden CPU file':>16}"
          f"{'learnt':>8}{'ratio':>7}{'tests file':>11}{'learnt':>7}{'ratio':>7}{'best':>6}"
          f"{'hidden file':>12}{'learnt':>7}{'ratio':>7}{'best':>6}")
    for kind, pairs in sorted(by_kind.items(), key=lambda kv: kv[0] != "all wrong"):
        n = len(pairs)
        c_off = sum(a.timings.cpu_ms for a, _ in pairs) / n
        c_on = sum(b.timings.cpu_ms for _, b in pairs) / n
        t_off = sum(tests_run(a) for a, _ in pairs) / n
        t_on = sum(tests_run(b) for _, b in pairs) / n
        t_best = sum(a.public.run + min(1, a.hidden.run) for a, _ in pairs) / n
        h_off = sum(hidden_cpu(a) for a, _ in pairs) / n
        h_on = sum(hidden_cpu(b) for _, b in pairs) / n
        hr_off = sum(a.hidden.run for a, _ in pairs) / n
        hr_on = sum(b.hidden.run for _, b in pairs) / n
        hr_best = sum(min(1, a.hidden.run) for a, _ in pairs) / n
        print(f"   {kind:<13}{n:>5}{c_off:>12.1f}{c_on:>8.1f}{c_off / max(c_on, 1e-9):>6.2f}x{h_off:>16.1f}"
              f"{h_on:>8.1f}{h_off / max(h_on, 1e-9):>6.2f}x{t_off:>11.2f}{t_on:>7.2f}{t_off / max(t_on, 1e-9):>6.2f}x"
              f"{t_off / max(t_best, 1e-9):>5.2f}x{hr_off:>12.2f}{hr_on:>7.2f}{hr_off / max(hr_on, 1e-9):>6.2f}x"
              f"{hr_off / max(hr_best, 1e-9):>5.2f}x")
    n = len(measured)
    if n:
        print(f"   worker tree CPU per measured job (all {n}): file {1000 * cpu_off / n:.1f} ms, "
              f"learnt {1000 * cpu_on / n:.1f} ms, ratio {cpu_off / max(cpu_on, 1e-9):.2f}x")
    else:
        print("   no wrong completion was measured: raise --limit or --per-kind")
    if changed:
        raise SystemExit(f"{name}: {len(changed)} rewards changed with the order")


def run_set(name: str, records: list[dict[str, Any]], r: redis.Redis, clients: tuple[FleetClient, ...],
            workers: tuple[Worker, ...], per_kind: int, kinds: tuple[str, ...]) -> None:
    """``clients`` and ``workers``: the baseline (file order, full mode), learnt order full mode,
    learnt order hidden mode (its client's default mode is hidden)."""
    c_off, c_on, c_hid = clients
    w_off, w_on, w_hid = workers
    register_problems(r, records)
    warm, measured = jobs_for(records, per_kind, kinds)
    # the correct programs first, on both workers: same rewards, and counts untouched by them
    right = [{"problem_id": rec["id"], "language": (rec.get("correct_languages") or ["python3"])[0],
              "completion": fence(rec["correct_solutions"][0], (rec.get("correct_languages") or ["python3"])[0])}
             for rec in records]
    fa, fb, fc = c_off.submit_many(right), c_on.submit_many(right), c_hid.submit_many(right)
    a, b, c = (FleetClient.gather(f, timeout=7200) for f in (fa, fb, fc))
    flips = [(j, x, y, z) for j, x, y, z in zip(right, a, b, c, strict=True) if not x.reward == y.reward == z.reward]
    print(f"\n{name}: {len(records)} problems; correct programs: {sum(x.reward == 1.0 for x in a)} / "
          f"{sum(x.reward == 1.0 for x in b)} / {sum(x.reward == 1.0 for x in c)} pass (file / learnt / learnt hidden), "
          f"{len(flips)} reward changes")
    for j, x, y, z in flips:
        print(f"   changed {j['problem_id']}: file {x.reward} {x.verdict} {x.stopped[:80]!r} / "
              f"learnt {y.reward} {y.verdict} {y.stopped[:80]!r} / hidden {z.reward} {z.verdict} {z.stopped[:80]!r}")
    t0 = time.perf_counter()
    FleetClient.gather(c_on.submit_many([{k: j[k] for k in JOB_FIELDS} for j in warm]), timeout=7200)
    print(f"   warm-up: {len(warm)} jobs on the fail-fast worker in {time.perf_counter() - t0:.0f}s")
    plain = [{k: j[k] for k in JOB_FIELDS} for j in measured]
    # compiled programs: built once per host, so whichever worker came first would pay the
    # compile; a public-mode pass builds them all before the measurement
    compiled = [j for j in plain if j["language"] != "python3"]
    if compiled:
        FleetClient.gather(c_off.submit_many(compiled, mode="public"), timeout=7200)
    cpu0 = [w.cpu_s() for w in workers]
    f_off, f_on, f_hid = c_off.submit_many(plain), c_on.submit_many(plain), c_hid.submit_many(plain)
    off, on, hid = (FleetClient.gather(f, timeout=7200) for f in (f_off, f_on, f_hid))
    cpu = tuple(w.cpu_s() - c0 for w, c0 in zip(workers, cpu0, strict=True))
    # both before either report: a report that finds a reward change ends the run
    changed_on, changed_hid = recheck(c_off, c_on, measured, off, on), recheck(c_off, c_hid, measured, off, hid)
    report(name, measured, off, on, cpu[0], cpu[1], changed_on)
    report_hidden(name, measured, off, on, hid, (cpu[0], cpu[1], cpu[2]), changed_hid)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=300, help="first N CodeContests problems")
    ap.add_argument("--per-kind", type=int, default=2, help="mutants per kind and problem")
    ap.add_argument("--kattis-time-scale", type=float, default=2.0, help="ICPC time limits x this (PyPy-sized)")
    ap.add_argument("--with-tle", action="store_true", help="ICPC: also the jury's time-limit submissions")
    ap.add_argument("--sets", default="demo,kattis,codecontests", help="which sets to run")
    ap.add_argument("--no-slow", action="store_true", help="leave out the too-slow mutants (each costs a time limit)")
    args = ap.parse_args()
    kinds = tuple(k for k in wrong_completions.KINDS if not (args.no_slow and k == "slow"))
    with tempfile.TemporaryDirectory() as tmp, RedisServer() as server:
        url = server.url
        r = redis.Redis.from_url(url)
        workers = (Worker(url, "ff-file", False, Path(tmp) / "off.log"),
                   Worker(url, "ff-learnt", True, Path(tmp) / "on.log"),
                   Worker(url, "ff-hidden", True, Path(tmp) / "hidden.log"))
        try:
            with FleetClient(url, queue="ff-file", use_cache=False, timeout=7200) as c_off, \
                    FleetClient(url, queue="ff-learnt", use_cache=False, timeout=7200) as c_on, \
                    FleetClient(url, queue="ff-hidden", use_cache=False, timeout=7200, mode="hidden") as c_hid:
                clients = (c_off, c_on, c_hid)
                sets = set(args.sets.split(","))
                if "demo" in sets:
                    run_set("demo problems (shipped)", demo_records(), r, clients, workers, args.per_kind, kinds)
                kattis = kattis_records(args.with_tle, args.kattis_time_scale) if "kattis" in sets else []
                if kattis is None:
                    print("\nicpc-kattis-31: SKIPPED, icpc-kattis-31.jsonl.gz not found (set CPFLEET_SHARED_DATA)")
                elif kattis:
                    run_set(f"icpc-kattis-31 ({len(kattis)} with a stated time limit x {args.kattis_time_scale:g}, not interactive)", kattis, r,
                            clients, workers, args.per_kind, kinds)
                cc = codecontests_records(args.limit) if "codecontests" in sets else []
                if cc is None:
                    print("\ncodecontests-300: SKIPPED, codecontests-300.jsonl not found (set CPFLEET_SHARED_DATA)")
                elif cc:
                    run_set(f"codecontests-300 (first {len(cc)})", cc, r, clients, workers, args.per_kind, kinds)
        finally:
            for w in workers:
                w.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
