"""The demo's own problem set: reproducible, shipped as generated, and every completion kind gets
the verdict the demo expects when judged by the real sandbox."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from cpfleet.demo import problems as dp
from cpfleet.jobs.pool import judge_iter


def test_the_shipped_file_is_exactly_what_the_generator_writes() -> None:
    regenerated = dp.gzip_bytes(dp.to_jsonl(dp.build_problems()))
    assert dp.shipped_bytes() == regenerated, "run: python -m cpfleet.demo.problems --write"


def test_generation_is_deterministic_and_the_seed_matters() -> None:
    assert dp.to_jsonl(dp.build_problems()) == dp.to_jsonl(dp.build_problems())
    assert dp.to_jsonl(dp.build_problems(seed=1)) != dp.to_jsonl(dp.build_problems())


def test_a_dozen_problems_with_public_and_hidden_tests_and_reference_solutions() -> None:
    problems = dp.load_shipped()
    assert len(problems) == 12
    assert len({p.id for p in problems}) == 12
    for p in problems:
        assert p.id.startswith("demo/")
        assert len(p.public_tests) == len(dp.PUBLIC_SIZES)
        assert len(p.hidden_tests) == len(dp.HIDDEN_SIZES)
        assert p.correct_solutions and len(p.incorrect_solutions) == 2
        assert p.description.strip()
        assert p.time_limit_s == dp.TIME_LIMIT_S


def test_the_demo_problems_written_plain_or_gzipped_read_back_through_the_one_loader(tmp_path: Path) -> None:
    """The demo module keeps no problem-file reader of its own: its output is what
    cpfleet.datasets.loading reads, as every command does."""
    from cpfleet.datasets.loading import load_problems

    built = dp.build_problems()[:3]
    data = dp.to_jsonl(built)
    (tmp_path / "p.jsonl").write_bytes(data)
    (tmp_path / "p.jsonl.gz").write_bytes(gzip.compress(data))
    plain = load_problems(tmp_path / "p.jsonl").problems
    assert plain == load_problems(tmp_path / "p.jsonl.gz").problems == built
    assert not hasattr(dp, "read_problem_file")


def test_broken_completions_are_broken_the_intended_way() -> None:
    for spec in dp.SPECS:
        with pytest.raises(SyntaxError):
            compile(dp.syntax_error(spec.reference), "<completion>", "exec")
        compile(dp.runtime_error(spec.reference), "<completion>", "exec")  # compiles, fails when run
        assert "```" not in dp.completions_for(spec)["no_code"]


@pytest.mark.slow
def test_every_completion_kind_gets_its_expected_verdict_in_the_sandbox() -> None:
    """Correct -> OK proves the reference and the independent oracle agree on every test."""
    problems = {p.id: p for p in dp.load_shipped()}
    completions = dp.demo_completions()
    jobs = [
        {"problem_id": pid, "completion": text, "job_id": f"{pid}:{kind}"}
        for pid, kinds in completions.items()
        for kind, text in kinds.items()
    ]
    results = list(judge_iter(problems, jobs, workers=2))
    wrong = [
        (r.job_id, str(r.verdict), r.observation[:200])
        for r in results
        if str(r.verdict) != str(dp.KINDS[r.job_id.rsplit(":", 1)[1]])
    ]
    assert not wrong
    # the slow ones are slow on the large hidden test, not on the examples
    for r in results:
        if r.job_id.endswith(":slow"):
            assert r.public.passed == r.public.total
