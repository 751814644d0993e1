"""``cpfleet prepare`` of a Hub dataset on a machine that cannot reach the Hub: a quick probe of
the Hub's address finds it, so the command fails at once naming the cause and how to get the
data there, instead of after the Hub client's minute of retries; and a dataset already in the
local Hub cache still converts, offline. The Hub's address is a real loopback port where
nothing listens (``HF_ENDPOINT``), the cache a real one in the layout huggingface_hub keeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_prepare import taco_rows

from cpfleet.fleet.redis_server import free_port

REPO = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path) -> dict[str, str]:
    """No network to the Hub (its address a closed loopback port), no proxy, no offline switch
    set by the user, a Hub home of this test's own."""
    drop = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HF_DATASETS_CACHE")
    env = {k: v for k, v in os.environ.items() if k not in drop and "proxy" not in k.lower()}
    return env | {"HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "HF_HOME": str(tmp_path / "hf-home")}


def _prepare(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cpfleet", "prepare", *args, "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def test_an_unreachable_hub_fails_at_once_naming_the_cause_and_how_to_get_the_data(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for extra in ([], ["--data-files", "train.jsonl"]):
        proc = _prepare(env, "--dataset", "acme/not-cached", "--out", str(tmp_path / "o.jsonl"), *extra)
        assert proc.returncode == 1, proc.stderr
        (line,) = proc.stderr.strip().splitlines()  # one line: no "Retrying in 8s [Retry 5/5]" before it
        port = env["HF_ENDPOINT"].rsplit(":", 1)[1]
        assert line.startswith(f"cpfleet prepare: cannot load 'acme/not-cached': the Hugging Face Hub cannot be "
                               f"reached (127.0.0.1:{port}: "), line
        assert "is not in the local cache" in line and "huggingface-cli download acme/not-cached" in line
        assert not (tmp_path / "o.jsonl").exists()


def in_hub_cache(tmp_path: Path, dataset: str, train_jsonl: str) -> None:
    """``dataset`` in the Hub cache under ``$HF_HOME`` (``_env``) as a download leaves it: a ref
    naming a snapshot that holds ``train.jsonl``."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf-home" / "hub" / ("datasets--" + dataset.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "train.jsonl").write_text(train_jsonl)


def test_a_dataset_in_the_hub_cache_still_converts_without_network(tmp_path: Path) -> None:
    env = _env(tmp_path)
    in_hub_cache(tmp_path, "acme/taco-mini", "".join(json.dumps(r) + "\n" for r in taco_rows()))
    out = tmp_path / "p.jsonl"
    proc = _prepare(env, "--dataset", "acme/taco-mini", "--data-files", "train.jsonl", "--split", "train",
                    "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_text().splitlines()) == 3  # taco_rows: 4 rows, one malformed


def test_a_malformed_dataset_in_the_hub_cache_offline_is_named_malformed_not_missing(tmp_path: Path) -> None:
    """Only the Hub libraries' "not in the cache" errors mean the data is missing: a cached file
    that does not parse was reported as "not in the local cache", with advice to download it."""
    env = _env(tmp_path)
    in_hub_cache(tmp_path, "acme/bad", '{"a": 1}\n{not json\n')
    proc = _prepare(env, "--dataset", "acme/bad", "--data-files", "train.jsonl", "--split", "train",
                    "--out", str(tmp_path / "o.jsonl"))
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("cpfleet prepare: cannot load 'acme/bad'"), line
    assert "not in the local cache" not in line and "huggingface-cli download" not in line, line
