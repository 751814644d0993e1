"""The fork server ("zygote"): a fresh, pre-imported interpreter that forks test children.

Process tree (one per runner, i.e. per worker slot)::

    runner (worker process)            holds expected outputs; never forks a child itself
      zygote   `python -I -m cpfleet.sandbox.zygote`: empty netns, minimal read-only root, preloaded
        job      per job: new pid, mount and IPC namespaces; forks the init, then mounts a
                 fresh test directory whenever the init asks (the init's seccomp filter
                 refuses mounts)
          init   pid 1 of the job's pid namespace: mounts /proc, compiles the code once, sets
                 no_new_privs and the seccomp filter (inherited by every test), then per test
            test   forks, confines itself (sandbox/isolation.py) and runs the program; after
                   it exits the init SIGKILLs everything left in the namespace and reaps it.
                   The next test's child is forked ahead, while the runner judges the last
                   test, and waits for its test (``JobInit._fork_ahead``).

A runner keeps one spare job ready (``"spare": True``): its job process and init are made, and
its /proc, filter and test directory set up, and its first test's child forked, while the runner
waits for work; the program's source arrives later in a "load" message. The spare has run
nothing and is used for one job only, so it is as fresh as a job started on demand, and a job's
start costs a compile.

The zygote is exec'd, not forked from the runner, so nothing the runner holds (expected
outputs, Redis connections) exists in any memory a child can read. Test inputs reach a child
as a memfd on fd 0; outputs leave through pipes the runner drains and caps.
Messages are ``marshal``-encoded over SOCK_SEQPACKET socketpairs (both ends are our own
trusted code; marshal is built in, so it adds no mapping to the process every test forks:
fork cost here grows with the number of mappings); fds travel with SCM_RIGHTS.

Here: the zygote itself. The job process and the job init: sandbox/jobinit.py; watching and
killing a running test: sandbox/police.py; the messages: sandbox/channel.py. Every module the
zygote imports runs under PyPy 3.9 too (sandbox/pypy_zygote.py).
"""

from __future__ import annotations

import _signal as signal  # the C module: `signal` would import enum into every fork
import _socket as socket  # the C module: `socket` would import array, selectors and enum
import gc
import marshal
import os
import select  # loaded by police.py anyway: no mapping of its own in the test's fork
import sys

from cpfleet.sandbox import child, isolation, linux, seccomp
from cpfleet.sandbox.channel import memfd_holding as memfd_holding
from cpfleet.sandbox.channel import read_all
from cpfleet.sandbox.channel import recv as recv
from cpfleet.sandbox.channel import send as send
from cpfleet.sandbox.jobinit import JobInit, gc_freeze, place_program, place_script_dir, serve_box

TYPE_CHECKING = False  # typing is not imported at run time: every module here is in every fork
if TYPE_CHECKING:
    from typing import Any

# Preloaded once so tests start warm. Chosen by how often the 300 CodeContests human solutions
# import them (sys 125, collections 61, math 54, os 32, io 28, heapq 21, bisect 14, itertools
# 14, threading 8, functools 6); rarer modules (random 10, fractions 6, string 3, re 2, ...) are
# imported by the programs that use them: everything in this process makes EVERY test's fork
# slower (~5.5 us per mapping here), so the zygote's own imports avoid re, enum, socket.py too.
# threading is preloaded apart, without its after-fork hook (child.preload_threading).
PRELOAD = ("bisect", "collections", "functools", "heapq", "io", "itertools", "math")

# Compiled (never run) once by the zygote at startup: the compiler's first use in a process
# faults in its working memory (parser arenas, interned names), which cost a job's compile
# ~1.5 ms in a fresh fork; with this memory already in the zygote, a job's compile takes
# ~0.4 ms more than a warm one and no job pays for a warm-up of its own (a warm-up in each
# spare job made a compile ~0.1 ms but cost every job ~1.5 ms of CPU, which showed as
# latency when jobs follow each other). Shaped like a typical contest solution so the memory
# it leaves is the size needed.
WARM_SOURCE = b"""\
import sys
from collections import defaultdict, deque
input = sys.stdin.readline


class Edge:
    __slots__ = ("to", "w")

    def __init__(self, to, w):
        self.to, self.w = to, w


def solve(n, m, edges, queries):
    graph = defaultdict(list)
    for a, b, w in edges:
        graph[a].append(Edge(b, w))
        graph[b].append(Edge(a, w))
    dist = [float("inf")] * (n + 1)
    dist[1] = 0
    todo = deque([1])
    while todo:
        u = todo.popleft()
        for e in graph[u]:
            if dist[u] + e.w < dist[e.to]:
                dist[e.to] = dist[u] + e.w
                todo.append(e.to)
    best = {q: dist[q] for q in queries if dist[q] < float("inf")}
    return [best.get(q, -1) for q in queries], sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))


def main():
    t = int(input())
    out = []
    for _ in range(t):
        n, m = map(int, input().split())
        edges = [tuple(map(int, input().split())) for _ in range(m)]
        queries = list(map(int, input().split()))
        try:
            answer, ranked = solve(n, m, edges, queries)
        except (ValueError, IndexError) as exc:
            answer, ranked = [], [str(exc)]
        out.append(" ".join(map(str, answer)) or "NO")
        out.append(f"{len(ranked)} {ranked[:3]!r} {sum(x for x in answer if x > 0) % 1_000_000_007}")
    print("\\n".join(out))


if __name__ == "__main__":
    main()
"""


class Zygote:
    def __init__(self, ctrl: socket.socket, config: dict[str, Any], cgroup_fds: list[int],
                 runner: int, runner_fd: int) -> None:
        self.ctrl = ctrl
        # the runner's process and a pidfd of it (-1: refused), watched in serve()
        self.runner = runner
        self.runner_fd = runner_fd
        self.uid: int = config["uid"]
        self.gid: int = config["gid"]
        self.python: str = config["python"]
        self.pch_dir: str = config.get("pch_dir", "")
        # where a job without a mount namespace makes its host directories (source, program
        # files, test directories): the runner's, removed with the zygote (zygote_process), so
        # a job killed with it (a spare, an interrupted test) leaves nothing behind
        self.scratch: str | None = config.get("scratch") or None
        # a configured solution interpreter (a venv with numpy...): its site-packages on the path
        # and bound into the sandbox, without running site or any .pth hook (those would load
        # modules into every test's fork)
        self.site_packages: list[str] = list(config.get("site_packages") or [])
        self.extra_python_dirs: list[str] = list(config.get("python_dirs") or [])
        # the languages' tool folders outside the system ones, bound as named (a symlinked Java
        # home stays a symlink there, beside the folder it names)
        self.tool_dirs: list[str] = list(config.get("tool_dirs") or [])
        for path in self.site_packages:
            if path not in sys.path:
                sys.path.append(path)
        # the last fd reads the slot's CPU counter when the runner sent one (cgroups.open_zygote_fds)
        self.cpu_usage_fd = cgroup_fds[-1] if config.get("cpu_usage_fd") and cgroup_fds else -1
        self.cgroup_fds = cgroup_fds[:-1] if self.cpu_usage_fd >= 0 else cgroup_fds
        self.layers: dict[str, bool] = {}
        self.notes: list[str] = []
        self.seccomp_filter: seccomp.Filter | None = None

    def setup(self, isolate: bool) -> None:
        can_switch = linux.has_capability(linux.CAP_SETUID) and linux.has_capability(linux.CAP_SETGID)
        if isolate:
            binds = {isolation.PCH: self.pch_dir} if self.pch_dir else {}
            dirs = isolation.python_dirs()
            dirs += [os.path.realpath(p) for p in self.extra_python_dirs if os.path.isdir(p)]
            dirs += [p for p in self.tool_dirs if os.path.isdir(p) and p not in dirs]
            zs = isolation.isolate_zygote(dirs, binds)
            self.layers.update(zs.layers)
            self.notes.extend(zs.notes)
        else:
            self.layers.update({k: False for k in ("netns", "mountns", "hidden_fs")})
            self.notes.append("isolation disabled by configuration")
        self.layers["uid_drop"] = can_switch and isolate
        if isolate and not can_switch:
            self.notes.append("no CAP_SETUID/CAP_SETGID: children keep the worker's uid "
                              "(RLIMIT_NPROC is shared with the worker, no uid separation)")
        self.layers["ipcns"] = self.layers.get("mountns", False)
        self.layers["cgroup"] = bool(self.cgroup_fds) and isolate
        isolation.drop_priority_allowances()
        self.layers["rlimits"] = True
        self.layers["no_new_privs"] = True
        self.seccomp_filter = seccomp.build() if isolate else None
        self.layers["seccomp"] = self.seccomp_filter is not None
        if isolate and self.seccomp_filter is None:
            self.notes.append(f"no seccomp filter for {os.uname().machine}: ptrace, keyrings, vsock stay reachable")
        child.install_site_builtins()
        child.prebuild_stdio()
        child.track_opened_files()
        for name in PRELOAD:
            __import__(name)
        child.preload_threading()
        compile(WARM_SOURCE, child.SCRIPT_NAME, "exec", dont_inherit=True)  # see WARM_SOURCE
        gc.collect()
        gc_freeze()  # children never traverse (and so never copy) the zygote's own objects

    def serve(self) -> None:
        """Start the jobs the runner asks for, until it closes our channel or its process
        exits. The runner's process, not the thread that started us: PR_SET_PDEATHSIG would fire
        when that thread ends, and a library caller may make a runner in a thread and use it from
        another. Its pidfd turns readable once the whole process is gone (even where a process it
        forked still holds the channel's other end); where pidfds are refused, the parent pid is
        checked each second. Our own job processes die with us by their PDEATHSIG (this process
        has one thread)."""
        poller = select.poll()
        poller.register(self.ctrl.fileno(), select.POLLIN)
        if self.runner_fd >= 0:
            poller.register(self.runner_fd, select.POLLIN)
        while True:
            ready = [fd for fd, _ in poller.poll(-1 if self.runner_fd >= 0 else 1000)]
            if self.runner_fd in ready or os.getppid() != self.runner:
                os._exit(0)
            if not ready:
                continue
            msg, fds = recv(self.ctrl)
            if msg is None:
                os._exit(0)
            self._reap()
            if msg.get("op") == "job":
                self._start_job(msg, fds)
            for fd in fds:
                os.close(fd)

    def _reap(self) -> None:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass

    def _start_job(self, msg: dict[str, Any], fds: list[int]) -> None:
        pid = os.fork()
        if pid != 0:
            return
        try:  # the job process: namespaces for the job, then the mounter of its test directory
            linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
            self.ctrl.close()
            if self.runner_fd >= 0:
                os.close(self.runner_fd)
            try:
                linux.unshare(linux.CLONE_NEWPID)
                self.layers["pidns"] = True
            except OSError as e:
                self.layers["pidns"] = False
                self.notes.append(f"pid namespace refused ({e}): orphans are found as the init's re-parented children")
            box = self._job_mount_namespace()
            program: dict[str, Any] | None = None
            prog_error = ""
            if msg.get("mode") == "program":
                try:
                    program = marshal.loads(read_all(fds[1]))
                    program["dir"] = place_program(program["files"], box is not None, self.scratch)
                except (OSError, ValueError, TypeError, KeyError, EOFError) as e:
                    prog_error = f"placing the program's files failed: {type(e).__name__}: {e}"
                    program = None
                else:
                    del program["files"]  # the init needs only where they are
            script_dir = script_error = ""
            if msg.get("mode") == "fork":
                try:
                    script_dir = place_script_dir(box is not None, self.scratch)
                except OSError as e:
                    script_error = f"preparing the directory of the program's source failed: {e}"
            init = os.fork()
            if init == 0:
                if box:
                    box[0].close()
                JobInit(self, msg, fds, box[1] if box else None, program, prog_error, script_dir,
                        script_error).run()
            for fd in fds:
                os.close(fd)  # only the init holds the job's channel: its death is the runner's EOF
            if box:
                box[1].close()
                serve_box(box[0], isolation.TestBox(self.uid, self.gid, bool(self.layers.get("uid_drop"))))
            os.waitpid(init, 0)
            for done in (program["dir"] if program is not None else "", script_dir):
                if done and box is None:
                    isolation.remove_tree(done)  # however deep the program's files go
        finally:
            os._exit(0)

    def _job_mount_namespace(self) -> tuple[socket.socket, socket.socket] | None:
        """The job's own mount + IPC namespace, where its /proc and test directory live, and
        the channel on which the init asks us (unfiltered root) to mount a fresh directory."""
        if not self.layers.get("mountns"):
            return None
        try:
            linux.unshare(linux.CLONE_NEWNS | (linux.CLONE_NEWIPC if self.layers.get("ipcns") else 0))
        except OSError as e:  # the zygote could, so this is not expected: degrade, and say so
            self.layers["mountns"] = self.layers["ipcns"] = False
            self.notes.append(f"job mount namespace refused ({e}): per-test temp dirs instead")
            return None
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def main() -> None:
    """Entry point; started as ``python -I -S -c ...`` (see zygote_process.zygote_command)."""
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    runner = int(sys.argv[2])
    runner_fd = linux.parent_pidfd(runner)
    if os.getppid() != runner:
        os._exit(1)  # the runner died before its pidfd was open
    msg, cgroup_fds = recv(ctrl)
    if msg is None:
        os._exit(0)
    z = Zygote(ctrl, msg, cgroup_fds, runner, runner_fd)
    z.setup(bool(msg.get("isolate", True)))
    try:
        send(ctrl, {"layers": z.layers, "notes": z.notes})
    except (BrokenPipeError, ConnectionResetError):  # the runner went away while this set up: none to serve
        os._exit(0)
    z.serve()


if __name__ == "__main__":
    main()
