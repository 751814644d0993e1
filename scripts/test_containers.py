"""The checks of scripts/test-containers, run against the real compose stack.

The bash script installs Docker, starts dockerd and builds the images; this runs the stack
(docker-compose.yml + docker/compose.test.yml, host networking, Redis on a free loopback port)
and checks what the deployment promises:

1. a replica whose sandbox is below CPFLEET_REQUIRE_ISOLATION (the worker container under
   Docker's default seccomp profile, which refuses pivot_root) exits 3 and leaves its job queued;
2. every pool process of both replicas reports isolation=full;
3. the demo jobs, plus a+b in C, C++, Java and PyPy, give through FleetClient exactly what
   ``cpfleet judge`` gives on this host;
4. three attack completions (connect to Redis, read /proc/1/environ, write outside /tmp) are
   blocked, and the problems are still in Redis;
5. a batch survives a replica killed (SIGKILL) and Redis restarted in its middle: one result
   per job id, none lost, none twice, each the expected verdict;
6. a third replica added with --scale worker=3 takes work;
7. a second host's workers (the worker service alone, ``--no-deps``, CPFLEET_REDIS_URL naming the
   first host's Redis) start no Redis of their own and take work.

It stops the stack (compose down -v) however it ends. Logs of every container go to --log-dir.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis
import yaml

from cpfleet.core.results import JobResult
from cpfleet.core.store import stored_ids
from cpfleet.demo import problems as dp
from cpfleet.demo.command import DemoJob, build_batch
from cpfleet.producer.client import FleetClient

REPO = Path(__file__).resolve().parents[1]
PROJECT = "cpfleet-test"
HOST2 = "cpfleet-test-host2"  # a second host's compose project: workers only, on PROJECT's Redis
WORKER_IMAGE = "cpfleet-worker:latest"
SHIPPED_PROBLEMS = REPO / "cpfleet" / "demo" / "data" / "demo-problems.jsonl.gz"
AB = "demo/a-plus-b"
# a+b in the compiled languages and PyPy: the image's toolchains, judged like Python
AB_PROGRAMS = {
    "cpp": "```cpp\n#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}\n```",
    "c": '```c\n#include <stdio.h>\nint main(void){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);return 0;}\n```',
    "java": (
        "```java\nimport java.util.*;\npublic class Main{public static void main(String[] x){"
        "Scanner s=new Scanner(System.in);long a=s.nextLong(),b=s.nextLong();System.out.println(a+b);}}\n```"
    ),
    "pypy3": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
}

SLEEPY_AB = "```python\nimport time\ntime.sleep(0.4)\na, b = map(int, input().split())\nprint(a + b)\n```"


def attack_programs(redis_port: int) -> dict[str, str]:
    """Each prints the right sum only when its attack fails, so OK means blocked; a
    successful attack prints what it got (a wrong answer) and, for Redis, flushes it."""
    head = "a, b = map(int, input().split())\n"
    return {
        "connect to Redis": head + (
            "import socket\n"
            "try:\n"
            f"    s = socket.create_connection(('127.0.0.1', {redis_port}), timeout=3)\n"
            "    s.sendall(b'FLUSHALL\\r\\n')\n"
            "    print('connected', s.recv(64))\n"
            "except OSError:\n"
            "    print(a + b)\n"
        ),
        "read /proc/1/environ": head + (
            "try:\n"
            "    print('read', open('/proc/1/environ', 'rb').read()[:300])\n"
            "except OSError:\n"
            "    print(a + b)\n"
        ),
        "write outside /tmp": head + (
            "wrote = []\n"
            "for path in ('/pwned', '/usr/pwned', '/etc/pwned', '/var/pwned', '/proc/1/root/pwned'):\n"
            "    try:\n"
            "        with open(path, 'w') as f:\n"
            "            f.write('x')\n"
            "        wrote.append(path)\n"
            "    except OSError:\n"
            "        pass\n"
            "print(wrote if wrote else a + b)\n"
        ),
    }


class CheckFailed(AssertionError):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def step(title: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            print(f"--- {title}", flush=True)
            out = fn(*args, **kwargs)
            print(f"    ok ({time.monotonic() - t0:.1f} s)", flush=True)
            return out

        return run

    return wrap


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(interval)
    check(predicate(), f"timed out after {timeout:g} s waiting for {what}")


class Stack:
    """The compose project, driven through docker-compose and the docker CLI."""

    def __init__(self, docker: str, redis_port: int, log_dir: Path) -> None:
        self.docker = docker
        self.redis_port = redis_port
        self.redis_url = f"redis://127.0.0.1:{redis_port}/0"
        self.log_dir = log_dir
        self.env = {
            **os.environ,
            "CPFLEET_TEST_REDIS_PORT": str(redis_port),
            "CPFLEET_REDIS_URL": self.redis_url,  # the compose file's worker-only-host setting
            "FLOWER_BASIC_AUTH": "test:" + uuid.uuid4().hex,  # required by the file; Flower is not started
        }

    def host_network_file(self) -> Path:
        """docker-compose.yml without its published ports, which host networking refuses (a
        compose override can add to a list but not empty it); the rest is the file as shipped."""
        data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
        for service in data["services"].values():
            service.pop("ports", None)
            if service.get("build") == ".":
                service["build"] = str(REPO)
        path = self.log_dir / "docker-compose.host.yml"
        path.write_text("# generated by scripts/test_containers.py from docker-compose.yml\n" + yaml.safe_dump(data))
        return path

    def compose(self, *args: str, timeout: float = 600, project: str = PROJECT) -> str:
        files = ["-f", str(self.host_network_file()), "-f", str(REPO / "docker" / "compose.test.yml")]
        argv = ["docker-compose", "-p", project, "--project-directory", str(REPO), *files, *args]
        out = subprocess.run(argv, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise CheckFailed(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def run_docker(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.docker, *args], capture_output=True, text=True, timeout=timeout)

    def containers(self, service: str, project: str = PROJECT) -> list[str]:
        out = self.run_docker(
            "ps", "-q", "--no-trunc", "--filter", f"label=com.docker.compose.project={project}",
            "--filter", f"label=com.docker.compose.service={service}",
        )  # fmt: skip
        return out.stdout.split()

    def logs(self, cid: str) -> str:
        out = self.run_docker("logs", cid)
        return out.stdout + out.stderr

    def node_name(self, cid: str) -> str | None:
        m = re.search(r"cpfleet-test-node: (\S+)", self.logs(cid))
        return m.group(1) if m else None

    def scale(self, workers: int) -> None:
        self.compose("up", "-d", "--no-build", "--no-recreate", "--scale", f"worker={workers}", "redis", "worker")

    def save_logs(self, project: str = PROJECT) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        out = self.run_docker("ps", "-aq", "--no-trunc", "--filter", f"label=com.docker.compose.project={project}")
        for cid in out.stdout.split():
            name = self.run_docker("inspect", "-f", "{{.Name}}", cid).stdout.strip().lstrip("/") or cid[:12]
            (self.log_dir / f"{name}-{cid[:12]}.log").write_text(self.logs(cid))

    def down(self, project: str = PROJECT) -> None:
        try:
            self.save_logs(project)
        finally:
            self.compose("down", "-v", "--timeout", "30", project=project)


def worker_ready(stack: Stack, cid: str) -> bool:
    """The node logged 'ready.' and each of its pool processes its sandbox's isolation."""
    text = stack.logs(cid)
    name = stack.node_name(cid)
    return name is not None and f"{name} ready." in text and len(re.findall(r"sandbox runner \w+ in pid", text)) >= 1


@step("a replica below CPFLEET_REQUIRE_ISOLATION (Docker's default seccomp profile) exits 3 and takes no job")
def check_isolation_gate(stack: Stack) -> None:
    queue = "gate-" + uuid.uuid4().hex[:8]
    r = redis.Redis.from_url(stack.redis_url)
    with FleetClient(stack.redis_url, queue=queue, timeout=60) as client:
        client.register_problems(dp.load_shipped()[:1])
        future = client.submit(AB, AB_PROGRAMS["pypy3"])
        check(r.llen(queue) == 1, "the job is queued")
        out = stack.run_docker(
            "run", "--rm", "--network", "host", "--cap-drop", "ALL",
            *[a for cap in ("SYS_ADMIN", "SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "CHOWN") for a in ("--cap-add", cap)],
            "--security-opt", "apparmor:unconfined", "--security-opt", "no-new-privileges:true",
            "--read-only", "--tmpfs", "/tmp:size=256m,mode=1777,exec",
            "-e", "CPFLEET_CGROUP_SETUP=1", "-e", f"CPFLEET_REDIS_URL={stack.redis_url}", "-e", f"CPFLEET_QUEUES={queue}",
            "-e", "CPFLEET_REQUIRE_ISOLATION=full", "-e", "CPFLEET_METRICS_PORT=0",
            WORKER_IMAGE, "cpfleet", "worker", "-n", "cpfleet@default-seccomp",
            timeout=300,
        )  # fmt: skip
        text = out.stdout + out.stderr
        check(out.returncode == 3, f"exit status {out.returncode}, want 3:\n{text[-3000:]}")
        check("refuses to start" in text and "does not start" in text, f"no reason given:\n{text[-3000:]}")
        print("    " + next(ln for ln in text.splitlines() if "refuses to start" in ln)[:300])
        check(r.llen(queue) == 1 and not future.done(), "the job is still queued, unanswered")
        future.cancel()
    r.delete(queue)


@step("every pool process of the replicas reports isolation=full")
def check_full_isolation(stack: Stack, cids: Sequence[str]) -> None:
    assert_full_isolation(stack, cids)


def assert_full_isolation(stack: Stack, cids: Sequence[str]) -> None:
    for cid in cids:
        text = stack.logs(cid)
        levels = re.findall(r"sandbox runner \w+ in pid \d+: isolation=(\w+)", text)
        check(bool(levels) and set(levels) == {"full"}, f"{cid[:12]}: isolation levels {levels}:\n{text[-3000:]}")
        check("cgroup v1 memory and pids hierarchies writable" in text or "cgroup v2 controllers delegated" in text,
              f"{cid[:12]}: the entrypoint did not prepare the cgroups")
        print(f"    {stack.node_name(cid)}: {len(levels)} pool processes at isolation=full")


def _summary(d: dict[str, Any]) -> tuple[Any, ...]:
    """What two judges of one job must agree on: verdict, reward, and per test set the tests
    passed and the first failure; every test's verdict too, except when a time limit stopped the
    job (which tests ran before its budget ended depends on the machine's speed). Of a failed
    all-or-nothing job's hidden tests only the total: the fleet runs first the hidden tests that
    ended earlier jobs (docs/failfast.md) and stops at the first failure, so how many passed
    before it depends on what the fleet had learnt, where `cpfleet judge` runs them in file order."""
    parts = []
    for part in ("public", "hidden"):
        s = d.get(part) or {}
        tests = () if d["verdict"] == "TIME_LIMIT" else tuple(t["verdict"] for t in s.get("tests", []))
        if part == "hidden" and d["verdict"] != "OK" and d.get("reward_shape") == "all_or_nothing":
            parts.append((s.get("total"),))
        else:
            parts.append((s.get("passed"), s.get("total"), s.get("first_failure"), tests))
    return (d["verdict"], d["reward"], *parts)


@step("the demo jobs (and a+b in C, C++, Java, PyPy) through FleetClient equal `cpfleet judge`")
def check_demo_against_judge(stack: Stack, work: Path) -> None:
    problems = dp.load_shipped()
    batch = build_batch(problems, dp.demo_completions(), True)
    jobs: list[dict[str, Any]] = [
        {"job_id": f"demo-{i}", "problem_id": j.problem_id, "completion": j.completion} for i, j in enumerate(batch)
    ]
    for lang, text in AB_PROGRAMS.items():
        jobs.append({"job_id": f"ab-{lang}", "problem_id": AB, "completion": text, "language": lang})
    jobs_file = work / "jobs.jsonl"
    jobs_file.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    judged = subprocess.run(
        [sys.executable, "-m", "cpfleet", "judge", str(SHIPPED_PROBLEMS), str(jobs_file), "--no-progress"],
        cwd=work, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    check(judged.returncode == 0, f"cpfleet judge failed:\n{judged.stderr[-3000:]}")
    local = {d["job_id"]: d for d in map(json.loads, judged.stdout.splitlines())}
    with FleetClient(stack.redis_url, timeout=600) as client:
        client.register_problems(problems)
        results = client.gather(client.submit_many(jobs))
    fleet = {r.job_id: r.to_dict() for r in results}
    check(set(local) == set(fleet) == {j["job_id"] for j in jobs}, "every job judged both ways")
    (work / "fleet-results.jsonl").write_text("".join(json.dumps(fleet[j["job_id"]]) + "\n" for j in jobs))
    (work / "judge-results.jsonl").write_text(judged.stdout)
    differ = [jid for jid in fleet if _summary(fleet[jid]) != _summary(local[jid])]
    check(not differ, "fleet and cpfleet judge differ on " + ", ".join(
        f"{jid}: fleet {_summary(fleet[jid])[:2]} judge {_summary(local[jid])[:2]}" for jid in differ))
    for lang in AB_PROGRAMS:
        check(fleet[f"ab-{lang}"]["verdict"] == "OK", f"a+b in {lang}: {fleet[f'ab-{lang}']['verdict']}")
    expected = {f"demo-{i}": j.expected for i, j in enumerate(batch)}
    wrong = {jid: (fleet[jid]["verdict"], want) for jid, want in expected.items() if fleet[jid]["verdict"] != want}
    check(not wrong, f"verdicts other than the demo's expected ones: {wrong}")
    workers = Counter(r.worker for r in results)
    print(f"    {len(jobs)} jobs identical; verdicts {dict(Counter(str(r.verdict) for r in results))}; by node {dict(workers)}")


@step("attack completions are blocked and the problems stay in Redis")
def check_attacks(stack: Stack) -> None:
    problems = dp.load_shipped()
    r = redis.Redis.from_url(stack.redis_url)
    with FleetClient(stack.redis_url, timeout=300) as client:
        client.register_problems(problems)
        attacks = attack_programs(stack.redis_port)
        names = list(attacks)
        results = client.gather(client.submit_many(
            [{"problem_id": AB, "completion": f"```python\n{attacks[n]}```", "job_id": n} for n in names]))
    for name, result in zip(names, results, strict=True):
        check(str(result.verdict) == "OK", f"attack '{name}' was not blocked: {result.verdict} {result.observation[:800]}")
        print(f"    {name}: blocked ({result.worker})")
    check({p.id for p in problems} <= stored_ids(r), "a problem is missing from Redis")


def _unique(completion: str, n: int) -> str:
    """The same program with a comment of its own (a result-cache miss), fence kept."""
    i = completion.rfind("```")
    if i <= 0 or not completion.lstrip().startswith("```"):
        return completion
    return completion[:i] + f"# fault batch {n}\n" + completion[i:]


@step("a replica killed and Redis restarted mid-batch: no result lost, none twice")
def check_faults(stack: Stack, cids: Sequence[str]) -> None:
    problems = dp.load_shipped()
    base = build_batch(problems, dp.demo_completions(), True) * 2
    # every fifth job a correct a+b that sleeps 0.4 s per test (wall time, no CPU): the batch
    # lasts long enough on any machine for the faults to land in its middle
    sleepy = DemoJob(AB, "correct", SLEEPY_AB, str(dp.KINDS["correct"]))
    mixed = [x for i, j in enumerate(base) for x in ([j, sleepy] if i % 4 == 3 else [j])]
    batch = [(f"fault-{n}", j, _unique(j.completion, n)) for n, j in enumerate(mixed)]
    with FleetClient(stack.redis_url, timeout=900) as client:
        client.register_problems(problems)
        futures = client.submit_many([{"job_id": jid, "problem_id": j.problem_id, "completion": c} for jid, j, c in batch])

        def done() -> int:
            return sum(f.done() for f in futures)

        wait_for(lambda: done() >= len(futures) // 5, 600, "a fifth of the batch", interval=0.2)
        check(done() < len(futures) // 2, "the batch went too fast for a fault in its middle")
        victim = cids[0]
        killed = stack.run_docker("kill", victim)
        check(killed.returncode == 0, f"docker kill: {killed.stderr}")
        print(f"    killed {stack.node_name(victim)} at {done()}/{len(futures)} results")
        wait_for(lambda: done() >= len(futures) // 2, 600, "half of the batch", interval=0.2)
        check(done() < len(futures), "the batch ended before Redis could be restarted in its middle")
        (redis_cid,) = stack.containers("redis")
        restarted = stack.run_docker("restart", "-t", "20", redis_cid)
        check(restarted.returncode == 0, f"docker restart redis: {restarted.stderr}")
        print(f"    restarted Redis at {done()}/{len(futures)} results")
        for _ in cf.as_completed(futures, timeout=900):
            pass
        results: list[JobResult] = client.gather(futures)
    ids = Counter(r.job_id for r in results)
    submitted = {jid for jid, _, _ in batch}
    check(set(ids) == submitted, f"lost: {sorted(submitted - set(ids))[:10]}")
    check(max(ids.values()) == 1 and len(results) == len(batch), "a job id answered twice")
    wrong = [(r.job_id, str(r.verdict), j.expected) for r, (_, j, _) in zip(results, batch, strict=True)
             if str(r.verdict) != j.expected]
    check(not wrong, f"verdicts other than expected: {wrong[:10]}")
    print(f"    {len(results)} jobs, {len(ids)} distinct ids, 0 lost, 0 twice, every verdict as expected; "
          f"by node {dict(Counter(r.worker for r in results))}")


@step("a third replica (--scale worker=3) takes work")
def check_scale_out(stack: Stack, before: Sequence[str]) -> None:
    stack.scale(3)
    new: list[str] = []

    def third_ready() -> bool:
        new[:] = [c for c in stack.containers("worker") if c not in before]
        return bool(new) and all(worker_ready(stack, c) for c in new)

    wait_for(third_ready, 300, "the new replica to be ready")
    assert_full_isolation(stack, new)
    names = {stack.node_name(c) for c in new}
    by_node = judge_correct_batch(stack, first=10_000, copies=2)
    check(any(by_node.get(n, 0) > 0 for n in names), f"the new replica {names} took no job: {dict(by_node)}")
    print(f"    jobs by node: {dict(by_node)}")


def judge_correct_batch(stack: Stack, first: int, copies: int) -> Counter[str | None]:
    """The demo's correct completions, ``copies`` times, each made unique (``first`` + its
    position: no result-cache hit), judged on the stack; every one must be accepted. Returns how
    many jobs each node judged."""
    problems = dp.load_shipped()
    batch = [j for j in build_batch(problems, dp.demo_completions(), True) if j.kind == "correct"]
    with FleetClient(stack.redis_url, timeout=600) as client:
        client.register_problems(problems)
        results = client.gather(client.submit_many(
            [{"problem_id": j.problem_id, "completion": _unique(j.completion, first + n)} for n, j in enumerate(batch * copies)]))
    check(all(str(r.verdict) == "OK" for r in results), "every correct completion accepted")
    return Counter(r.worker for r in results)


@step("a second host's workers (worker service only, --no-deps, CPFLEET_REDIS_URL) join the fleet")
def check_second_host(stack: Stack) -> None:
    """docs/deployment.md's worker-only host: a second compose project on the same file starts
    no Redis of its own (``--no-deps``) and its replica consumes from the first one's Redis."""
    stack.compose("up", "-d", "--no-build", "--no-deps", "--scale", "worker=1", "worker", project=HOST2)
    try:
        check(not stack.containers("redis", project=HOST2), "the worker-only host started a Redis of its own")
        new: list[str] = []

        def ready() -> bool:
            new[:] = stack.containers("worker", project=HOST2)
            return len(new) == 1 and worker_ready(stack, new[0])

        wait_for(ready, 300, "the second host's replica to be ready")
        name = stack.node_name(new[0])
        by_node = judge_correct_batch(stack, first=20_000, copies=3)
        check(by_node.get(name, 0) > 0, f"the second host's replica {name} took no job: {dict(by_node)}")
        print(f"    jobs by node: {dict(by_node)}")
    finally:
        stack.down(project=HOST2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--docker", default="docker", help="the docker CLI to use")
    parser.add_argument("--log-dir", type=Path, default=REPO / "out" / "test-containers", help="container logs")
    args = parser.parse_args(argv)
    gzip.decompress(SHIPPED_PROBLEMS.read_bytes())  # the demo set is there (fails early otherwise)
    stack = Stack(args.docker, free_port(), args.log_dir)
    work = args.log_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for project in (HOST2, PROJECT):  # what an interrupted earlier run left
        try:
            stack.compose("down", "-v", "--timeout", "10", project=project)
        except CheckFailed as exc:
            print(f"(cleaning up an earlier run: {exc})", file=sys.stderr)
    try:
        print(f"--- compose up: Redis on 127.0.0.1:{stack.redis_port}, --scale worker=2", flush=True)
        stack.scale(2)
        wait_for(lambda: len(stack.containers("worker")) == 2 and all(worker_ready(stack, c) for c in stack.containers("worker")),
                 300, "two ready replicas")
        workers = stack.containers("worker")
        check_isolation_gate(stack)
        check_full_isolation(stack, workers)
        check_demo_against_judge(stack, work)
        check_attacks(stack)
        check_faults(stack, workers)
        check_scale_out(stack, workers)
        check_second_host(stack)
    except CheckFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.down()
        print(f"container logs in {args.log_dir}", flush=True)
    print(f"all container checks passed in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
