"""TRL's GRPOTrainer end to end on CPU with cpfleet's reward functions, against a real local
fleet (examples/trl_grpo.py). Needs the ``trl`` extra (torch, transformers, trl), which the
default install leaves out: without it the test is skipped with that reason."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("trl", "torch", "transformers")),
    reason="TRL end to end needs the trl extra: pip install -e '.[trl]' (torch is too large for the default install)",
)


@pytest.mark.slow
@pytest.mark.parametrize("variant", [[], ["--async-reward"]], ids=["sync", "async"])
def test_grpo_trainer_steps_with_rewards_from_the_fleet(variant: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "trl_grpo.py"), "--steps", "3", *variant],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    steps = re.findall(r"^step \d+ reward ([\d.]+)$", proc.stdout, re.M)
    assert len(steps) == 3
    assert all(0.0 <= float(r) <= 1.0 for r in steps)
    # the trainer logged the fleet's verdicts, and nothing was masked as infrastructure
    assert "rewards flowed:" in proc.stdout
    assert re.search(r'"cpfleet/verdict/[A-Z_]+": ', proc.stdout)
    logged = proc.stderr + proc.stdout
    assert "'cpfleet/masked': '0'" in logged
