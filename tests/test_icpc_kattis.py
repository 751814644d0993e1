"""The shared ICPC/Kattis file's jury submissions get the jury's verdict: accepted 1.0, wrong
answer 0.0, through the same path as ``cpfleet judge`` (bench/icpc_kattis_submissions.py runs
all of them; this test runs every checker kind: the package's own output validator, Kattis float
flags, the exact default, and an interactor).

Python 3 submissions run under PyPy, as Kattis judges them. Known exception in the full run
(reported by the bench, not asserted here): gcpc2021/brentering submissions/accepted/gregor.py
is Python 2 (``raw_input``) filed as Python 3: RUNTIME_ERROR.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cpfleet.jobs.pool import judge_iter

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import icpc_kattis_submissions as bench  # noqa: E402

DATA = Path(os.environ.get("CPFLEET_SHARED_DATA", REPO.parent / "shared" / "data")) / "icpc-kattis-31.jsonl.gz"
PROBLEMS = {
    "gcpc2021/arcade2",  # kattis_validator (validate.h)
    "gcpc2022/lotsofland",  # kattis_validator (validation.h)
    "gcpc2022/enjoyableentree",  # float with validator_flags, an accepted and a wrong answer
    "gcpc2022/improvingit",  # exact_tokens, an accepted and a wrong answer
    "gcpc2022/hardcorehangman",  # interactive, an accepted and a wrong answer
    "kattis_examples/guess",  # interactive, two wrong answers
}


@pytest.mark.skipif(not DATA.exists(), reason=f"shared data not found at {DATA} (set CPFLEET_SHARED_DATA)")
def test_jury_python_submissions_get_the_jury_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPFLEET_COMPILE_CACHE_DIR", str(tmp_path))
    problems, cases, jobs = bench.select(bench.load(DATA), {"python3"}, include_interactive=True, only=PROBLEMS)
    assert {c.problem_id for c in cases} == PROBLEMS
    assert {c.expected for c in cases} == {"accepted", "wrong_answer"}
    results = list(judge_iter(problems, jobs, workers=1, progress=False))
    wrong = [
        (case.job_id, case.expected, r.reward, str(r.verdict), r.infra_message)
        for case, r in zip(cases, results, strict=True)
        if r.reward != bench.EXPECTED_REWARD[case.expected]
    ]
    assert not wrong


@pytest.mark.skipif(not DATA.exists(), reason=f"shared data not found at {DATA} (set CPFLEET_SHARED_DATA)")
def test_a_package_without_a_memory_limit_gets_the_kattis_default() -> None:
    # problemtools and DOMjudge judge such a package with 2048 MiB; the jury's accepted FFT
    # solutions of decryptingzodiac need ~800 MB and were MEMORY_LIMIT under cpfleet's 512 MB
    problems, _, _ = bench.select(bench.load(DATA), {"cpp"}, include_interactive=False, only={"gcpc2021/decryptingzodiac"})
    assert problems["gcpc2021/decryptingzodiac"].memory_limit_mb == bench.KATTIS_DEFAULT_MEMORY_MB == 2048
