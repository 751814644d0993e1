"""Run jobs for the endpoints that return a program's output (SandboxFusion's ``/run_code``,
code-judge's ``/run`` and ``/judge``), with concurrent calls for one program coalesced.

verl's sandbox_fusion reward posts every test case of a completion as its own ``/run_code``
with the same code, all at once. Each such call joins an open *group* for its program and
limits (``RunSpec``); a group is published as one multi-input run job when it has
``coalesce_max_inputs`` inputs or when ``coalesce_ms`` pass without a new call (at most
``WINDOW_CAP`` windows after its first), so the job's fixed cost
(queue round trip, compile, sandbox set-up) is paid once for the completion, not once per test.

A client that holds a bounded number of calls in flight (verl's ``max_concurrent``) sends a
completion's tests a few at a time: each waits for a thread that an earlier answer frees. While
the fleet's queue holds jobs no worker has taken, a job published now would only wait there, so
a group whose window ran out is *held* (at most ``MAX_HOLD_MS`` after its first call) and takes
in the calls that arrive meanwhile. The queue's length is read as this replica's jobs are
answered (a worker just freed takes the next queued job) and every ``QUEUE_POLL_S``; after each
reading the longest-held groups are published, as many as keep ``queue_depth()`` jobs queued, so
a freed worker finds one waiting. The fleet stays as busy as before (a group is held only while
the queue already has the jobs the workers will take next), and a call waits at most MAX_HOLD_MS
longer, only while the fleet is saturated. An idle fleet holds nothing, nor does a queue that
cannot be read or a reading older than ``FRESH_S``.
Identical calls (same program, limits and stdin) share one input, including a client's retry
of a call whose answer it gave up on: it finds the input still in flight and waits for it.

An input the job did not run to its end (NOT_RUN: the job's time budget ran out before it or
cut it short, which coalescing makes more likely) is run again in a later group: it says nothing about the program.
A run job that failed in the fleet (INTERNAL) raises Refused: the caller answers in the form
its client retries, never with an output.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from cpfleet.core import protocol as wire
from cpfleet.core.lru import LRU
from cpfleet.core.results import RunJobResult, RunOutput, RunStatus
from cpfleet.gateway.app import FleetFailed, Refused

if TYPE_CHECKING:
    from cpfleet.gateway.app import Gateway

# the least output cap a coalesced input gets (a group is kept small enough for it)
MIN_GROUP_OUTPUT_CAP = 256 * 1024
# a group is published at most this many coalescing windows after its first call
WINDOW_CAP = 4
# while run jobs wait in the fleet's queue, the window is this share of that wait, up to a cap
QUEUE_WAIT_SHARE = 0.5
MAX_WINDOW_MS = 100.0
# a group is held while the fleet's queue is not empty, up to this long after its first call
# (a client throttled to N calls in flight sends a completion's last tests one job's answer later)
MAX_HOLD_MS = 1000.0
# the queue's length (one LLEN, shared by all groups) is read while groups are open: at once when
# one of this replica's jobs is answered (a worker just freed took the next queued job) or a
# window runs out on a stale reading, else every QUEUE_POLL_S (other clients' jobs end too);
# a reading older than FRESH_S holds nothing
QUEUE_POLL_S = 0.1
FRESH_S = 0.05
# a reading's round trip: the queue should hold the jobs that workers take meanwhile
READ_LATENCY_S = 0.005
# a window that ran out on a stale reading waits for a fresh one at most this many round trips
STALE_WAITS = 4
QUEUE_WAIT_WEIGHT = 0.2  # of each new job in the moving average
# answers of refused calls are kept this long for the client's retry (verl's come 1 s and 2 s
# later), at most this many and this many bytes of output (an answer holds up to the output cap)
KEEP_S = 60.0
KEEP_MAX = 1024
KEEP_MAX_BYTES = 256 * 1024 * 1024
# how often one input is sent again after the job left it NOT_RUN before the call gives up
MAX_NOT_RUN_RETRIES = 3
# A group's inputs run one after another on one slot: those not started within this share of
# its callers' wait (``RunMessage.start_within_s``, at least START_WINDOW_MIN_S) come back
# NOT_RUN and are sent again each in a job of its own, so a program slow on every input spreads
# over the fleet's free slots instead of running past what verl waits (its 504s become -1, a
# sandbox error, for a program whose tests each finish within their limit).
START_WINDOW_SHARE = 1 / 3
START_WINDOW_MIN_S = 0.5


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What makes calls share a run job: the program, its language and the limits."""

    code: str
    language: str
    time_limit_s: float | None = None
    memory_limit_mb: int | None = None
    output_cap: int = 4096
    files: tuple[tuple[str, bytes], ...] = ()
    fetch_files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunAnswer:
    """One call's answer: the job (for its compile step and language) and this input's run,
    None when nothing ran (COMPILE_ERROR or NO_CODE: ``job.status`` says which)."""

    job: RunJobResult
    run: RunOutput | None
    # the output was clipped at a cap the group's size imposed, below the call's own: run it alone
    clipped_by_group: bool = False


@dataclass(slots=True)
class _Group:
    cap_at: float  # loop time by which the group is published whatever arrives, unless held
    opened: float = 0.0  # loop time of its first call
    hold_until: float = 0.0  # loop time up to which a backed-up queue holds it
    size: int = 0  # bytes of its stdins
    stdins: list[bytes] = field(default_factory=list)
    futures: list[asyncio.Future[RunAnswer]] = field(default_factory=list)
    launched: bool = False
    held: bool = False
    stale_waits: int = 0  # times its window ran out on a stale reading and it waited for one
    timer: asyncio.TimerHandle | None = None
    wait_s: float | None = None  # the shortest wait of its callers (None: none of them has one)

    def start_window(self) -> float | None:
        """The job's ``start_within_s``: None for one input or callers that wait without end."""
        if len(self.stdins) < 2 or self.wait_s is None:
            return None
        # within the wire's bound: a caller's wait may be far longer (a compile_timeout of days)
        return min(wire.MAX_START_WITHIN_S, max(START_WINDOW_MIN_S, self.wait_s * START_WINDOW_SHARE))


class RunCoalescer:
    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway
        self._open: dict[RunSpec, _Group] = {}
        # (spec, stdin digest) -> the answer of that input, while its job is in flight
        self._inflight: dict[tuple[RunSpec, bytes], asyncio.Future[RunAnswer]] = {}
        self.jobs = 0  # run jobs published
        self.inputs = 0  # inputs sent in them
        self.running = 0  # run jobs published and not answered
        self.queue_wait_ms = 0.0  # moving average of the queue wait of this gateway's run jobs
        self.shared = 0  # calls that joined an input in flight (or took one kept for them)
        # inputs whose caller was refused while they were in flight, and their answers once
        # they came, with when they expire (KEEP_S seconds on; at most KEEP_MAX of them and
        # KEEP_MAX_BYTES of output, the oldest dropped first): the client's retry takes it
        self._abandoned: set[tuple[RunSpec, bytes]] = set()
        self._kept: LRU[tuple[RunSpec, bytes], tuple[RunAnswer, float]] = LRU(
            KEEP_MAX, max_weight=KEEP_MAX_BYTES, weigh=lambda kept: _size(kept[0])
        )
        # the fleet queue's length as last read, and when (loop time); read while groups are held
        self._queued = 0
        self._queued_at = float("-inf")
        self._poller: asyncio.Task[None] | None = None
        self._read_soon = asyncio.Event()  # set: read the queue now, not at the next poll
        self._wanted = 0  # jobs the queue may take until the next reading (queue_depth() - length)
        self._dry = 0  # consecutive readings of an empty queue
        self._finished: collections.deque[float] = collections.deque(maxlen=32)  # loop times of answers
        self.held = 0  # groups held past their window while the queue was backed up

    async def run(self, spec: RunSpec, stdin: bytes, wait_s: float | None) -> RunAnswer:
        """The run of ``spec`` on ``stdin`` (admitted against the backlog; Refused past ``wait_s``).
        A call whose input is already in flight (a retry after a refusal) joins it at no cost."""
        key = self._key(spec, stdin)
        kept = self._kept.pop(key)
        if kept is not None and kept[1] > time.monotonic():
            self.shared += 1
            return kept[0]
        shared = self._inflight.get(key)
        try:
            if shared is not None:
                self.shared += 1
                joined: RunAnswer = await self.gw.wait(asyncio.shield(shared), wait_s, units=0)
                return joined
            answer: RunAnswer = await self.gw.wait(self._answer(spec, stdin, wait_s), wait_s)
            return answer
        except Refused:
            if key in self._inflight:  # still running: its answer is kept a while for the retry
                self._abandoned.add(key)
            raise

    @staticmethod
    def _key(spec: RunSpec, stdin: bytes) -> tuple[RunSpec, bytes]:
        return (spec, hashlib.blake2b(stdin, digest_size=16).digest())

    async def _answer(self, spec: RunSpec, stdin: bytes, wait_s: float | None = None) -> RunAnswer:
        key = self._key(spec, stdin)
        shared = self._inflight.get(key)
        if shared is not None:
            self.shared += 1
            return await asyncio.shield(shared)
        fut: asyncio.Future[RunAnswer] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        fut.add_done_callback(lambda f: self._settle(key, f))
        try:
            answer = await self._until_run(spec, stdin, wait_s)
        except BaseException as exc:
            _fail(fut, exc)  # sharers get it through their own await
            raise
        fut.set_result(answer)
        return answer

    def _settle(self, key: tuple[RunSpec, bytes], fut: asyncio.Future[RunAnswer]) -> None:
        if self._inflight.get(key) is fut:
            del self._inflight[key]
        if key in self._abandoned:
            self._abandoned.discard(key)
            if not fut.cancelled() and fut.exception() is None:
                answer = fut.result()
                # this input's run only: the job's other runs are other calls' (a job may carry
                # up to the protocol's reply bound), and the kept answers fit KEEP_MAX_BYTES
                kept = replace(answer, job=replace(answer.job, runs=()))
                self._kept.put(key, (kept, time.monotonic() + KEEP_S))

    async def _until_run(self, spec: RunSpec, stdin: bytes, wait_s: float | None) -> RunAnswer:
        alone = False
        for _ in range(MAX_NOT_RUN_RETRIES + 1):
            answer = await self._enqueue(spec, stdin, alone=alone, wait_s=wait_s)
            if answer.clipped_by_group:
                answer = await self._enqueue(spec, stdin, alone=True)
            if answer.run is None or answer.run.status != RunStatus.NOT_RUN:
                return answer
            # its group's slot was busy with the inputs before it: its own job, on a free slot
            alone = True
        raise Refused("the fleet could not start this input within its job's time budget; retry")

    def _enqueue(self, spec: RunSpec, stdin: bytes, alone: bool = False,
                 wait_s: float | None = None) -> asyncio.Future[RunAnswer]:
        loop = asyncio.get_running_loop()
        if alone:  # its own job, with the call's whole output cap
            solo = _Group(cap_at=loop.time())
            solo.size, solo.stdins, solo.futures = len(stdin), [stdin], [loop.create_future()]
            self._launch(spec, solo)
            return solo.futures[0]
        window = self.window_s()
        group = self._open.get(spec)
        if group is not None and group.stdins and group.size + len(stdin) > self._room(spec):
            self._launch(spec, group)  # one job carries at most protocol.MAX_RUN_PAYLOAD_BYTES
            group = None
        if group is None:
            now = loop.time()
            hold = MAX_HOLD_MS / 1000.0 if self.gw.config.coalesce_ms > 0 else 0.0
            group = _Group(cap_at=now + WINDOW_CAP * window, opened=now, hold_until=now + hold)
            self._open[spec] = group
            if hold:
                self._poll()  # the queue's length is fresh by the time the window runs out
        fut: asyncio.Future[RunAnswer] = loop.create_future()
        if wait_s is not None:
            group.wait_s = wait_s if group.wait_s is None else min(group.wait_s, wait_s)
        group.size += len(stdin)
        group.stdins.append(stdin)
        group.futures.append(fut)
        if len(group.stdins) >= self._max_inputs(spec):
            self._launch(spec, group)
        else:
            # the window restarts with each call (a completion's tests come as a burst that a
            # loaded client spreads out), up to WINDOW_CAP windows after the group's first call
            if group.timer is not None:
                group.timer.cancel()
            group.timer = loop.call_at(min(loop.time() + window, group.cap_at), self._expire, spec, group)
        return fut

    def _expire(self, spec: RunSpec, group: _Group) -> None:
        """A group's window ran out: published, or held while the fleet's queue already has the
        jobs it needs until the next reading (``_wanted``). Held groups are let go, the longest
        held first, by the reader of the queue as it wants jobs, or at their ``hold_until``."""
        if group.launched:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now < group.hold_until:
            self._poll()
            if now - self._queued_at < FRESH_S:
                if self._wanted > 0:
                    self._wanted -= 1
                    self._launch(spec, group)
                    return
                if not group.held:
                    group.held = True
                    self.held += 1
                    self.gw.metrics.run_held.inc()
                group.timer = loop.call_at(group.hold_until, self._launch, spec, group)
                return
            if self._poller is not None and group.stale_waits < STALE_WAITS:
                # read the queue now and look again once that round trip is done
                group.stale_waits += 1
                self._read_soon.set()
                group.timer = loop.call_at(now + READ_LATENCY_S, self._expire, spec, group)
                return
        self._launch(spec, group)

    def _let_go(self) -> None:
        """After a reading: publish the held groups the queue wants, the longest held first."""
        if self._wanted <= 0:
            return
        held = sorted(((g.opened, sp) for sp, g in self._open.items() if g.held), key=lambda item: item[0])
        for _, sp in held[: self._wanted]:
            self._wanted -= 1
            self._launch(sp, self._open[sp])

    def queue_depth(self) -> int:
        """Jobs the fleet's queue should hold so that no worker finds it empty before the next
        reading: one, plus twice the jobs this replica's answers say finish in one reading's round trip."""
        done = self._finished
        if len(done) < 2 or done[-1] <= done[0]:
            return 1
        rate = (len(done) - 1) / (done[-1] - done[0])
        return 1 + math.ceil(2 * rate * READ_LATENCY_S)

    def _poll(self) -> None:
        """Keep the fleet queue's length fresh while groups are open (one reader at a time)."""
        if self._poller is None:
            self._poller = asyncio.ensure_future(self._read_queue())

    async def _read_queue(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            fleet = self.gw.fleet
            while self._open:
                self._read_soon.clear()  # a job answered from here on asks for the next reading
                self._queued = await asyncio.to_thread(fleet.queue_depth)
                self._queued_at = loop.time()
                # an empty queue at consecutive readings may mean idle workers, as many as the
                # fleet has: the jobs let go double at each such reading (a slow start)
                self._dry = self._dry + 1 if self._queued == 0 else 0
                self._wanted = max(0, (self.queue_depth() << min(max(self._dry - 1, 0), 10)) - self._queued)
                self._let_go()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._read_soon.wait(), QUEUE_POLL_S)
        except Exception:  # Redis away or the client closing: hold nothing on a guess
            self._queued, self._queued_at = 0, float("-inf")
            self._wanted = len(self._open)
            self._let_go()
            self._wanted = 0
        finally:
            self._poller = None

    def _max_inputs(self, spec: RunSpec) -> int:
        """Inputs one group takes: the configured most, within the protocol's bounds on inputs
        and on a reply (each input's outputs get at least MIN_GROUP_OUTPUT_CAP)."""
        per_input = 2 * min(spec.output_cap, MIN_GROUP_OUTPUT_CAP) + len(spec.fetch_files) * wire.FETCH_FILE_BYTES
        return max(1, min(self.gw.config.coalesce_max_inputs, wire.MAX_RUN_INPUTS,
                          wire.MAX_RUN_REPLY_BYTES // max(1, per_input)))

    @staticmethod
    def group_cap(spec: RunSpec, inputs: int) -> int:
        """The output cap of a job of ``inputs`` inputs: the call's own, or less where the
        protocol's bound on a reply (inputs x (2 x cap + fetched files)) demands it. An output
        clipped by that lower cap is run again alone (``clipped_by_group``)."""
        per_input = wire.MAX_RUN_REPLY_BYTES // max(1, inputs) - len(spec.fetch_files) * wire.FETCH_FILE_BYTES
        return max(0, min(spec.output_cap, per_input // 2))

    @staticmethod
    def _room(spec: RunSpec) -> int:
        """Bytes of stdin one run job of ``spec`` can carry besides its code and files."""
        fixed = len(spec.code.encode("utf-8", "surrogatepass")) + sum(len(data) for _, data in spec.files)
        return wire.MAX_RUN_PAYLOAD_BYTES - fixed

    def window_s(self) -> float:
        """The coalescing window: ``coalesce_ms``, or, while the fleet's queue is backed up (run
        jobs lately waited longer than that before a worker took them), a share of that wait up
        to MAX_WINDOW_MS. A job published then would wait in the queue anyway; held here it takes
        in the calls that follow (verl's throttled clients send a completion's tests a few at a
        time), and fewer, larger jobs drain the queue sooner. An idle fleet keeps the short one."""
        base = max(0.0, self.gw.config.coalesce_ms)
        if not self.running:  # none of this replica's jobs is queued: the last wait is stale
            return base / 1000.0
        return max(base, min(QUEUE_WAIT_SHARE * self.queue_wait_ms, MAX_WINDOW_MS if base else 0.0)) / 1000.0

    def _launch(self, spec: RunSpec, group: _Group) -> None:
        if group.launched:
            return
        group.launched = True
        if group.timer is not None:
            group.timer.cancel()
        if self._open.get(spec) is group:
            del self._open[spec]
        self.jobs += 1
        self.inputs += len(group.stdins)
        self.gw.metrics.runs.inc()
        self.gw.metrics.run_inputs.inc(len(group.stdins))
        cap = self.group_cap(spec, len(group.stdins))
        self.running += 1
        task = asyncio.ensure_future(self._submit(spec, group.stdins, cap, group.start_window()))
        task.add_done_callback(lambda t: self._deliver(group, t, cap < spec.output_cap))

    async def _submit(self, spec: RunSpec, stdins: list[bytes], cap: int, start_within_s: float | None) -> RunJobResult:
        fleet = self.gw.fleet
        result: RunJobResult = await fleet.arun(
            spec.code,
            stdins,
            language=spec.language,
            time_limit_s=spec.time_limit_s,
            memory_limit_mb=spec.memory_limit_mb,
            output_cap=cap,
            files=dict(spec.files) or None,
            fetch_files=spec.fetch_files,
            start_within_s=start_within_s,
        )
        return result

    def _deliver(self, group: _Group, task: asyncio.Future[RunJobResult], capped: bool) -> None:
        self.running -= 1
        self._finished.append(asyncio.get_running_loop().time())
        if self._poller is not None:
            self._read_soon.set()
        if task.cancelled():
            exc: BaseException | None = Refused("the run job was cancelled (the gateway is shutting down)")
        else:
            exc = task.exception()
        if exc is not None:
            if not isinstance(exc, Refused | ConnectionError | ValueError):
                exc = Refused(f"the run job failed: {type(exc).__name__}: {exc}")
            _fail_open(group.futures, exc)
            return
        job = task.result()
        self.queue_wait_ms += QUEUE_WAIT_WEIGHT * (job.queued_ms - self.queue_wait_ms)
        if job.infra_error:
            _fail_open(group.futures, FleetFailed(f"the fleet could not run the program: {job.infra_message}"))
            return
        for i, f in enumerate(group.futures):
            if f.done():
                continue
            run = job.runs[i] if i < len(job.runs) else None
            if run is not None and run.status == RunStatus.INTERNAL:
                _fail(f, FleetFailed(f"the fleet could not run this input: {run.detail or 'sandbox failure'}"))
            elif run is None and job.status == RunStatus.FINISHED:
                _fail(f, Refused(f"the run job answered {len(job.runs)} of {len(group.futures)} inputs"))
            else:
                clipped = capped and run is not None and (run.stdout_truncated or run.stderr_truncated)
                f.set_result(RunAnswer(job, run, clipped_by_group=clipped))


def stdout_not_comparable(run: RunOutput) -> str:
    """Why the text of ``run``'s stdout must never be compared with an expected output ("" when
    it may be): a prefix of what the program wrote (clipped at the output cap), or bytes that
    were not UTF-8, which read as U+FFFD and would then equal an expected text holding U+FFFD
    itself. The endpoints that return a program's output to a caller who compares it (verl's
    ``/run_code``, Piston's ``/execute``) answer such a clean exit as a failed run, naming this."""
    if run.stdout_truncated:
        return f"stdout of {run.stdout_bytes} bytes clipped to {len(run.stdout.encode('utf-8', 'replace'))}"
    if not run.stdout_utf8:
        return "stdout is not UTF-8 text: its undecodable bytes read as U+FFFD, which no expected output equals"
    return ""


def _fail(fut: asyncio.Future[RunAnswer], exc: BaseException) -> None:
    """Fail ``fut`` with ``exc``, marked retrieved: whoever awaits it gets ``exc``, and a future
    no one awaits any more (its caller gone) is not logged as 'exception never retrieved'."""
    fut.set_exception(exc)
    fut.exception()


def _fail_open(futures: list[asyncio.Future[RunAnswer]], exc: BaseException) -> None:
    """``_fail`` each of ``futures`` not yet done with the one ``exc``."""
    for f in futures:
        if not f.done():
            _fail(f, exc)


def _size(answer: RunAnswer) -> int:
    """Bytes of output a kept answer holds (its run's stdout, stderr and fetched files)."""
    run = answer.run
    if run is None:
        return len(answer.job.compile.stderr) if answer.job.compile is not None else 0
    return len(run.stdout) + len(run.stderr) + sum(map(len, run.files.values()))
