"""The README's trainer recipes, run as each trainer would run them, against a real fleet: the
TRL snippet as written, verl's config lines loaded the way verl loads a custom reward function,
and the ``cpfleet serve`` line started as written, then called at each URL the OpenRLHF, slime,
verl sandbox_fusion and SandboxFusion SDK lines point at, with the payload that client sends."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import FleetWorker

from cpfleet.core.store import register_problems
from cpfleet.fleet.redis_server import RedisServer, free_port

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
SECTION = README[README.index("## Trainers:") : README.index("## The result")]
DEFAULT_URL = "redis://127.0.0.1:6379/0"
ADD = {
    "id": "demo/readme-add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "0 0\n", "output": "0\n"}],
}
ADD_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
GOOD = f"```python\n{ADD_CODE}```"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", SECTION, re.M | re.S)


def lines(block: str) -> list[str]:
    """Command lines with backslash continuations joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    import redis

    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        client = redis.Redis.from_url(redis_server.url)
        register_problems(client, [ADD])
        client.close()
        yield worker


def test_the_trl_recipe_runs_as_written(node: FleetWorker, tmp_path: Path) -> None:
    (code,) = blocks("python")
    env = {**os.environ, "CPFLEET_REDIS_URL": node.redis_url}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TRL rewards: [1.0, 0.0]" in proc.stdout


def test_the_verl_config_lines_load_and_score_as_verl_calls_them(node: FleetWorker) -> None:
    (cmd,) = [ln for b in blocks("bash") for ln in lines(b) if "custom_reward_function.path=" in ln]
    settings = dict(w.lstrip("+").split("=", 1) for w in shlex.split(cmd) if "=" in w)
    path, name = settings["custom_reward_function.path"], settings["custom_reward_function.name"]
    prefix = "custom_reward_function.reward_kwargs."
    kwargs = {k[len(prefix) :]: v.replace(DEFAULT_URL, node.redis_url) for k, v in settings.items() if k.startswith(prefix)}
    # verl: importlib.util.spec_from_file_location on the path, getattr(name), reward_kwargs merged in
    spec = importlib.util.spec_from_file_location("custom_module", REPO / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, name)
        row = {"data_source": "codecontests", "extra_info": {"index": 3, "split": "train"}}
        inline = json.dumps({"inputs": ["5 7\n", "0 0\n"], "outputs": ["12\n", "1\n"]})  # the second is wrong
        scores = [
            fn(row["data_source"], GOOD, ADD["id"], row["extra_info"], **kwargs),
            fn(row["data_source"], GOOD, inline, row["extra_info"], **kwargs),
        ]
        module.close_verl_connections()
    finally:
        sys.modules.pop("custom_module", None)
    assert [list(s) for s in scores] == [["score", "acc", "verdict", "infra_error", "pass_rate", "num_tests"]] * 2
    assert scores[0]["score"] == 1.0 and scores[0]["acc"] == 1.0
    assert scores[1]["score"] == 0.5 and scores[1]["infra_error"] == 0  # reward_shape=fraction from the config


def _http(url: str, payload: Any) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _url_in(line: str) -> str:
    m = re.search(r"http://127\.0\.0\.1:\d+[^\s]*", line)
    assert m, line
    return m.group(0)


@pytest.mark.slow
def test_the_serve_recipe_answers_every_client_line(node: FleetWorker, tmp_path: Path) -> None:
    (block,) = [b for b in blocks("bash") if "cpfleet serve" in b]
    port = free_port()
    cmds = [
        ln.replace(DEFAULT_URL, node.redis_url).replace("127.0.0.1:8080", f"127.0.0.1:{port}").replace("--port 8080", f"--port {port}")
        for ln in lines(block)
    ]
    assert f"--port {port}" in cmds[0]
    serve = shlex.split(cmds[0].replace(".venv/bin/", str(Path(sys.executable).parent) + "/"))
    assert serve[0].endswith("cpfleet") and serve[1] == "serve"
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(serve, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    if json.loads(r.read())["ok"]:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < end, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        seen = set()
        for line in cmds[1:]:
            if "--reward.remote_url" in line:  # OpenRLHF, one sample per request as it sends them
                prompt = "<|im_start|>user\nAdd.<|im_end|>\n<|im_start|>assistant\n"
                status, body = _http(
                    _url_in(line), {"query": [prompt + GOOD + "<|im_end|>"], "prompts": [prompt], "labels": [ADD["id"]]}
                )
                assert (status, body["rewards"], body["scores"]) == (200, [1.0], [1.0])
                seen.add("openrlhf")
            elif "--rm-url" in line:  # slime
                assert _http(_url_in(line), {"prompt": "Add.", "response": GOOD, "label": ADD["id"]}) == (200, 1.0)
                seen.add("slime")
            elif "sandbox_fusion.url=" in line:  # verl's call_sandbox_api payload, one test case
                payload = {"compile_timeout": 10, "run_timeout": 10, "code": ADD_CODE, "stdin": "5 7\n",
                           "memory_limit_MB": 1024, "language": "python", "files": {}, "fetch_files": []}
                status, body = _http(_url_in(line), payload)
                assert status == 200 and body["status"] == "Success" and body["run_result"]["stdout"] == "12\n"
                seen.add("verl-sandbox-fusion")
            elif line.startswith("export SANDBOX_FUSION_ENDPOINT="):
                pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
                env = {**os.environ, "SANDBOX_FUSION_ENDPOINT": line.split("=", 1)[1]}
                sdk_code = (
                    "from sandbox_fusion import run_code, RunCodeRequest\n"
                    f"r = run_code(RunCodeRequest(code={ADD_CODE!r}, stdin='2 3\\n', language='python'))\n"
                    "print(r.status.value, repr(r.run_result.stdout))\n"
                )
                out = subprocess.run([sys.executable, "-c", sdk_code], env=env, capture_output=True, text=True, timeout=120)
                assert out.stdout.strip() == "Success '5\\n'", out.stderr[-2000:]
                seen.add("sdk")
        assert seen == {"openrlhf", "slime", "verl-sandbox-fusion", "sdk"}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_the_gateway_pages_serve_recipe_is_the_one_run_above() -> None:
    # docs/gateway.md shows the serve command too; it must be the README's, which the test above
    # starts as written, so the page's recipe is run by that test
    readme = next(ln for b in blocks("bash") for ln in lines(b) if "cpfleet serve" in ln)
    page = (REPO / "docs" / "gateway.md").read_text()
    shown = [ln.strip() for ln in re.findall(r"```bash\n(.*?)```", page, re.S)[0].splitlines() if "cpfleet serve" in ln]
    assert shown == [readme]
