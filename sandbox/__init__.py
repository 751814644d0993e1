"""Untrusted-code execution and judging, on top of ``cpfleet.core``. Imports no celery and no redis.

What the folder holds (each module's docstring says why it exists): the judge (env.py:
``judge_locally``; judging.py: one test and the job's budget; verdicts.py, observation.py) and
run jobs (runs.py); the runners (runner.py: the ``CodeRunner`` seam and ``make_runner``, which
runners.py re-exports; forkserver.py, zygote.py, zygote_process.py, jobs.py, channel.py: the fork
server; pypy_zygote.py; subprocess_runner.py, the reference semantics) and the program mode of
compiled languages (programs.py, compiled.py); isolation (isolation.py, linux.py, seccomp.py,
cgroups.py, slots.py, police.py, jobinit.py, child.py), the memory a test may have here
(capacity.py) and the start-up self-test (selftest.py);
the code in a completion (extract.py, syntax_errors.py); function calls (fncall.py,
callharness.py); interactors (interactive.py, pairs.py). Two packages: languages/ (one module per
language's toolchain) and checker_programs/ (one module per checker-program protocol).

Modules are imported individually (``from cpfleet.sandbox.env import judge_locally``); this
package initialiser imports nothing, so the zygote (booted with this folder as its only package
path) and the workers load only what they use.
"""
