"""TRL's GRPOTrainer for a few steps on CPU, rewarded by a cpfleet fleet through ``TRLReward``.

    pip install -e '.[trl]'
    python examples/trl_grpo.py                      # starts a local fleet for the run
    python examples/trl_grpo.py --redis redis://...   # or uses a running one (cpfleet up)

No hub access: the model is a tiny randomly initialised GPT-2 and the tokenizer is built here.
So that a random policy still produces judgeable answers, the tokenizer's vocabulary holds, for
each of a few demo problems, its whole correct program, a wrong program and a slow one as
single tokens (each a complete fenced block), plus prose tokens: a sampled completion is a
sequence of those, the fleet judges its first fenced block, and the rewards the trainer logs
are real verdicts (correct 1.0, wrong or too slow 0.0, no block 0.0). The policy learns which
token to emit first for each prompt, so the mean reward tends to rise over the steps.

Prints one line per step (``step N reward MEAN``) and ``rewards flowed: ...`` at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

DEMO_PROBLEMS = ("a-plus-b", "sum-of-list", "fibonacci-mod", "sort-numbers")


def fenced_token(code: str) -> str:
    """A whole answer as one vocabulary entry; the trailing newline keeps fences on their own line
    when the decoder joins tokens with spaces."""
    return f"```python\n{code.rstrip()}\n```\n"


def build_tokenizer(specs: list[Any]) -> Any:
    """A word-level tokenizer whose prompt words and answer blocks are single tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for tok in ["<pad>", "<eos>", "<unk>", "Solve:", "Here is my answer.\n", "Hmm, not sure.\n"]:
        vocab.setdefault(tok, len(vocab))
    for spec in specs:
        vocab.setdefault(f"<{spec.name}>", len(vocab))
        for code in (spec.reference, spec.wrong, spec.slow):
            vocab.setdefault(fenced_token(code), len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.padding_side = "left"
    return tok


def build_model(tokenizer: Any) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPT2LMHeadModel(config)


@contextlib.contextmanager
def fleet_url(redis_url: str | None) -> Iterator[str]:
    if redis_url:
        yield redis_url
        return
    from cpfleet import LocalFleet

    with tempfile.TemporaryDirectory() as logs, LocalFleet(flower_port=None, metrics_port=None, log_dir=logs) as fleet:
        yield str(fleet.redis_url)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--redis", default=os.environ.get("CPFLEET_REDIS_URL"), help="a running fleet (default: start one)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--generations", type=int, default=4, help="completions per prompt (GRPO group size)")
    p.add_argument("--async-reward", action="store_true", help="use AsyncTRLReward (TRL runs it on its event loop)")
    args = p.parse_args(argv)

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from cpfleet import AsyncTRLReward, FleetClient, TRLReward
    from cpfleet.demo.problems import SPECS, load_shipped, problem_id

    specs = [s for s in SPECS if s.name in DEMO_PROBLEMS]
    tokenizer = build_tokenizer(specs)
    model = build_model(tokenizer)
    rows = [{"prompt": f"Solve: <{s.name}>", "problem_id": problem_id(s.name)} for s in specs]
    dataset = Dataset.from_list(rows * 4)

    with fleet_url(args.redis) as url:
        with FleetClient(url) as client:
            client.register_problems([pb for pb in load_shipped() if pb.id in {r["problem_id"] for r in rows}])
        reward: Any = (AsyncTRLReward if args.async_reward else TRLReward)(url, timeout_s=120, name="cpfleet")
        with tempfile.TemporaryDirectory() as out:
            config = GRPOConfig(
                output_dir=out,
                per_device_train_batch_size=args.generations,
                num_generations=args.generations,
                max_completion_length=4,
                max_steps=args.steps,
                learning_rate=5e-2,
                logging_steps=1,
                report_to="none",
                use_cpu=True,
                save_strategy="no",
                temperature=1.0,
                seed=0,
            )
            trainer = GRPOTrainer(
                model=model, reward_funcs=[reward], args=config, train_dataset=dataset, processing_class=tokenizer
            )
            trainer.train()
        reward.close()
    history = [h for h in trainer.state.log_history if "reward" in h]
    for h in history:
        print(f"step {h.get('step')} reward {h['reward']:.3f}")
    verdicts = {k: v for k, v in history[-1].items() if "verdict" in k} if history else {}
    print("rewards flowed: " + json.dumps({"steps": len(history), "last": verdicts}, sort_keys=True))
    return 0 if history else 1


if __name__ == "__main__":
    sys.exit(main())
