"""Judge many jobs on one machine: a process pool where each process holds ONE runner.

``judge_iter`` is the engine of ``cpfleet judge`` and ``cpfleet validate``. Design:

- Processes are started with "spawn": a pool process never inherits the parent's memory (the
  expected outputs of every problem); each creates its runner once (the runner starts its own
  zygote fresh) and closes it when the process exits.
- Problems travel to each process once, in the initializer (msgpack), never per job; a job is
  just ``{problem_id, completion, job_id}``.
- Results come back in input order; at most ``window`` jobs are in flight, so a long JOBS stream
  is read lazily and memory stays bounded.
- A pool process that dies (a runner bug, the OOM killer) breaks the pool: the jobs that were in
  flight are re-run one at a time in a fresh pool, so the job that kills its process is found
  and reported as an infrastructure error while the innocent ones are judged normally.
- ``workers=1`` judges in the calling process (no pool; useful for tests and small runs).
- A pool process dies with the judging process however it ends (Ctrl-C, kill -9), and lives as
  long as it, whichever thread started the pool: a caller may start ``judge_iter`` in a thread
  that ends while another thread reads the results.

As with any "spawn" pool, a script that calls ``judge_iter`` with ``workers > 1`` needs the
``if __name__ == "__main__":`` guard (the pool processes re-import the main module).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Mapping, Sized
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import msgpack

from cpfleet.core.errors import OptionError
from cpfleet.core.problem import Problem
from cpfleet.core.protocol import check_options, sendable_completion
from cpfleet.core.results import JobResult, JobStamp
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import linux
from cpfleet.sandbox.env import DEFAULT_MAX_PUBLIC_SHOWN, judge_locally
from cpfleet.sandbox.runner import (  # the factory starts nothing until called
    RUNNER_KINDS,
    CodeRunner,
    make_runner,
)

log = logging.getLogger(__name__)


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class PoolProcess:
    """One pool process's judging state: the problems, their versions, one runner (replaced if it
    breaks); each job it takes is judged by ``sandbox.env.judge_locally``."""

    def __init__(
        self,
        problems: Mapping[str, Problem],
        *,
        runner_kind: str,
        reward_shape: str,
        mode: str,
        max_public_shown: int | None,
        unavailable: Mapping[str, str] | None = None,
    ) -> None:
        self.problems = problems
        self.unavailable = dict(unavailable or {})  # problem id -> why it is not there (skipped at load)
        self.runner_kind = runner_kind
        self.reward_shape = reward_shape
        self.mode = mode
        self.max_public_shown = max_public_shown
        self.worker = f"judge-{os.getpid()}"
        self._versions: dict[str, str] = {}
        self._runner: CodeRunner | None = None

    @property
    def runner(self) -> CodeRunner:
        if self._runner is None:
            self._runner = make_runner(self.runner_kind)
        return self._runner

    def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            runner.close()

    def judge(self, job: Mapping[str, Any], index: int) -> JobResult:
        job_id = str(job.get("job_id") if job.get("job_id") is not None else index)
        pid = job.get("problem_id")
        completion = job.get("completion")
        # every answer of this job is built from it, so no result is patched afterwards
        stamp = JobStamp(job_id, pid if isinstance(pid, str) else str(pid or ""), self.mode, self.reward_shape,
                         worker=self.worker)
        if not isinstance(pid, str) or not isinstance(completion, str | bytes):
            result = stamp.infra("a job needs 'problem_id' (str) and 'completion' (str)")
        elif pid not in self.problems:
            why = self.unavailable.get(pid) or f"unknown problem {pid!r}"
            result = stamp.infra(why, Verdict.UNKNOWN_PROBLEM)
        else:
            problem = self.problems[pid]
            version = self._versions.get(pid)
            if version is None:
                version = self._versions[pid] = problem.content_version()
            try:
                runner = self.runner
            except Exception as e:  # a runner that cannot start is infrastructure
                result = stamp.infra(f"cannot start runner {self.runner_kind!r}: {e}")
            else:
                try:
                    result = judge_locally(
                        problem,
                        completion,
                        runner,
                        reward_shape=self.reward_shape,
                        mode=self.mode,
                        job_id=job_id,
                        max_public_shown=self.max_public_shown,
                        problem_version=version,
                        language=job.get("language") if isinstance(job.get("language"), str) else None,
                        worker=self.worker,
                    )
                except Exception as e:
                    # a bug in the judge itself: this job is INTERNAL (as on the pool and fleet
                    # paths) and the rest of the batch is still judged; the runner may be
                    # mid-test, so it is never reused
                    log.exception("judging job %s of problem %s failed", job_id, pid)
                    self.close()
                    result = stamp.infra(f"judge error: {e!r}")
                except BaseException:
                    self.close()  # an interrupt: the runner may be mid-test, never reuse it
                    raise
                if result.infra_error and result.verdict == Verdict.INTERNAL:
                    self.close()  # start the next job on a fresh runner
        return result


# --- pool process side -------------------------------------------------------------------------
_judge: PoolProcess | None = None


def _init_process(problems_blob: bytes, options: dict[str, Any], parent: int) -> None:
    global _judge
    _die_with(parent)
    # Out of the terminal's foreground process group: Ctrl-C reaches only the parent, which
    # stops this process itself (kill_pool), instead of every pool process printing a
    # KeyboardInterrupt traceback and finishing its test first. Until here SIGINT and SIGTERM were
    # blocked (_spawning): one sent while this process started is dropped, then each is as before.
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent stops it; a kill of its own ends it
    records = msgpack.unpackb(problems_blob, raw=False)
    problems = {key: Problem.from_dict(rec) for key, rec in records.items()}
    _judge = PoolProcess(problems, **options)
    atexit.register(_judge.close)


def _die_with(parent: int) -> None:
    """SIGKILL this pool process when the judging process ``parent`` exits, however it exits
    (Ctrl-C, kill -9): one interrupted while it started this process has no handle on it to
    kill, and it would wait on its queue for ever. Its runner's zygote follows: it watches this
    process the same way (sandbox/zygote.py). Not PR_SET_PDEATHSIG here: that fires when the
    *thread* that forked this process exits, and a library caller may start the pool in a thread
    that ends while another thread still reads the results. A thread waits on a pidfd of the parent, readable once the whole
    process has exited (polling the parent pid each second where pidfds are refused)."""
    pidfd = linux.parent_pidfd(parent)
    if os.getppid() != parent:  # the parent died before the pidfd was open (or it is another's pid)
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent, pidfd), name="cpfleet-parent-watch", daemon=True).start()


def _watch_parent(parent: int, pidfd: int) -> None:
    if pidfd >= 0:
        select.select([pidfd], [], [])
    else:
        while os.getppid() == parent:
            time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGKILL)


def _judge_blob(blob: bytes) -> bytes:
    assert _judge is not None, "pool process not initialised"
    index, job = _unpack(blob)
    return _pack(_judge.judge(job, index).to_dict())


# --- parent side -------------------------------------------------------------------------------
# the signals that stop a judging run (cpfleet.cli makes SIGTERM one, as Ctrl-C's SIGINT is)
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def _spawning() -> Iterator[None]:
    """SIGINT and SIGTERM held while pool processes may be started, so a Ctrl-C (or a ``kill``)
    cannot land between a process's start and the write of what it needs (it would print an
    EOFError or "pickle data was truncated" traceback, still in the terminal's process group, and
    never be killed: the pool does not know it yet).

    Blocked (not lost) in this thread, and a new process inherits the mask, so a Ctrl-C while it
    imports cannot print a KeyboardInterrupt traceback there. A process-directed signal may still
    reach another thread of this process (the executor's manager thread, a queue's feeder), whose
    C handler would raise KeyboardInterrupt here mid-start: in the main thread each Python handler
    is swapped for one that only notes it until the block ends. The first signal is then
    delivered as before, once."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    noted: list[tuple[int, Any]] = []
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            if callable(signal.getsignal(sig)):
                previous[sig] = signal.signal(sig, lambda signum, frame: noted.append((signum, frame)))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal held in this thread arrives here
        if noted and noted[0][0] in previous:
            previous[noted[0][0]](*noted[0])  # one that reached another thread: its handler raises here


def _wire_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``job`` a pool process judges, its completion as the fleet's client sends it
    (``protocol.sendable_completion``): a lone surrogate in it (JSON's ``"\\ud800"``) failed
    msgpack here and ended the whole run with a traceback, and judged in this process it was
    another program than the fleet judges (invalid UTF-8 in the source, a COMPILE_ERROR, where
    the fleet's worker reads U+FFFD and runs it)."""
    wire = {k: job.get(k) for k in ("problem_id", "completion", "job_id", "language")}
    if isinstance(wire["completion"], str):
        wire["completion"] = sendable_completion(wire["completion"])
    return wire


def _pack(obj: Any) -> bytes:
    """msgpack for the pool's own pipe, which carries any str a caller gave (a job id with a lone
    surrogate too) and brings it back as it was."""
    return msgpack.packb(obj, use_bin_type=True, unicode_errors="surrogatepass")


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, unicode_errors="surrogatepass")


def _job_id(job: Mapping[str, Any], index: int) -> str:
    return str(job.get("job_id") if job.get("job_id") is not None else index)


# Jobs in flight per pool process. Results are yielded in input order, so a long job at the head
# holds back everything after it: with too small a window the other processes finish their
# share and sit idle until the head is done. 32 per process keeps them busy through the long
# jobs of real problem sets while a lazily read JOBS stream still stays bounded in memory (a
# pending result is one clipped JobResult).
WINDOW_PER_WORKER = 32


def judge_iter(
    problems: Mapping[str, Problem],
    jobs: Iterable[Mapping[str, Any]],
    *,
    workers: int | None = None,
    reward_shape: str = "all_or_nothing",
    mode: str = "full",
    runner_kind: str = "forkserver",
    progress: bool = False,
    max_public_shown: int | None = DEFAULT_MAX_PUBLIC_SHOWN,
    window: int | None = None,
    unavailable: Mapping[str, str] | None = None,
) -> Generator[JobResult, None, None]:
    """Judge ``jobs`` (``{problem_id, completion, job_id?}``; job_id defaults to the job's index)
    and yield one JobResult per job, in input order. Unknown problems come back as
    UNKNOWN_PROBLEM infrastructure errors, whose message is ``unavailable[problem_id]`` when
    given (e.g. why the loader skipped that problem). ``workers`` defaults to the usable CPUs.

    Closing the iterator early (an interrupt in the caller's loop) kills the pool processes at
    once rather than waiting for the tests they are running."""
    check_options(reward_shape, mode)
    if runner_kind not in RUNNER_KINDS:
        raise OptionError(f"runner_kind must be one of {RUNNER_KINDS}, got {runner_kind!r}")
    if max_public_shown is not None and max_public_shown < 0:  # refused here, not once per job in the pool
        raise OptionError(f"max_public_shown must be >= 0 (None: all), got {max_public_shown}")
    n_workers = max(1, workers if workers is not None else default_workers())
    total = len(jobs) if isinstance(jobs, Sized) else None
    options = {
        "runner_kind": runner_kind,
        "reward_shape": reward_shape,
        "mode": mode,
        "max_public_shown": max_public_shown,
        "unavailable": dict(unavailable or {}),
    }
    from tqdm import tqdm

    bar = tqdm(total=total, disable=not progress, file=sys.stderr, unit="job", dynamic_ncols=True)
    try:
        if n_workers == 1:
            results = _in_process(problems, jobs, options)
        else:
            if isinstance(jobs, list | tuple):  # ship only the problems these jobs need
                wanted = {j.get("problem_id") for j in jobs}
                problems = {k: p for k, p in problems.items() if k in wanted}
            results = _pooled(problems, jobs, options, n_workers, window or WINDOW_PER_WORKER * n_workers)
        for result in results:
            bar.update(1)
            if progress and result.infra_error:
                bar.write(f"[{result.job_id}] infrastructure error: {result.infra_message}", file=sys.stderr)
            yield result
    finally:
        bar.close()


def _in_process(
    problems: Mapping[str, Problem], jobs: Iterable[Mapping[str, Any]], options: dict[str, Any]
) -> Iterator[JobResult]:
    judge = PoolProcess(problems, **options)
    try:
        for index, job in enumerate(jobs):
            yield judge.judge(_wire_job(job), index)
    finally:
        judge.close()


def _pooled(
    problems: Mapping[str, Problem],
    jobs: Iterable[Mapping[str, Any]],
    options: dict[str, Any],
    n_workers: int,
    window: int,
) -> Iterator[JobResult]:
    blob = msgpack.packb({k: p.to_dict() for k, p in problems.items()}, use_bin_type=True)
    ctx = multiprocessing.get_context("spawn")

    def new_pool(size: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(size, mp_context=ctx, initializer=_init_process, initargs=(blob, options, os.getpid()))

    def submit(pool: ProcessPoolExecutor, index: int, job: Mapping[str, Any]) -> Future[bytes]:
        with _spawning():  # ProcessPoolExecutor starts its processes in submit
            return pool.submit(_judge_blob, _pack([index, _wire_job(job)]))

    pool = new_pool(n_workers)
    pending: deque[tuple[int, Mapping[str, Any], Future[bytes]]] = deque()
    source = enumerate(jobs)
    exhausted = False
    finished = False
    try:
        while True:
            while not exhausted and len(pending) < window:
                item = next(source, None)
                if item is None:
                    exhausted = True
                else:
                    pending.append((item[0], item[1], submit(pool, *item)))
            if not pending:
                finished = True
                return
            index, job, future = pending[0]
            try:
                data = future.result()
            except BrokenProcessPool:
                pool.shutdown(wait=True, cancel_futures=True)
                suspects = [(i, j) for i, j, _ in pending]
                pending.clear()
                for i, j in suspects:  # one at a time: find the job that kills its process
                    yield _isolated(new_pool, submit, i, j)
                pool = new_pool(n_workers)
                continue
            except Exception as e:  # a bug on the pool side: report it, keep judging
                pending.popleft()
                yield JobResult.infra(_job_id(job, index), str(job.get("problem_id", "")), f"judge pool: {e!r}")
                continue
            pending.popleft()
            yield JobResult.from_dict(_unpack(data))
    finally:
        if not finished:  # interrupted, or the caller stopped reading: nothing more is wanted
            kill_pool(pool)
        pool.shutdown(wait=True, cancel_futures=True)


def kill_pool(pool: ProcessPoolExecutor) -> None:
    """SIGKILL every process of the pool (their zygotes follow, each watching its process), so
    its shutdown returns at once instead of after the tests in flight. ProcessPoolExecutor has no
    public way to do this before Python 3.14 (``kill_workers``)."""
    kill = getattr(pool, "kill_workers", None)
    if kill is not None:
        kill()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(ProcessLookupError, AttributeError):
            proc.kill()


def _isolated(new_pool: Any, submit: Any, index: int, job: Mapping[str, Any]) -> JobResult:
    pool: ProcessPoolExecutor = new_pool(1)
    try:
        data = submit(pool, index, job).result()
        return JobResult.from_dict(_unpack(data))
    except BrokenProcessPool:
        message = (
            "the judging process died while running this job (twice), or could not start at all "
            "(a script calling judge_iter with workers > 1 needs `if __name__ == '__main__':`)"
        )
    except Exception as e:
        message = f"judge pool: {e!r}"
    except BaseException:  # an interrupt: stop the process now, not after its test
        kill_pool(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return JobResult.infra(_job_id(job, index), str(job.get("problem_id", "")), message)
