"""`trl-ext sandbox serve` and `CodeReward(executor=...)`: the served judge gives the local judge's verdicts, refuses
what it must before running anything, and no fault of a server becomes a verdict. Real servers (subprocesses on
loopback), real sandboxes, real faults (signals); nothing is mocked."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests
from servers import TOKEN, environment, free_port, headers, judge_servers, log_of, start_server, stop

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox import cpp_compiler


def fenced(code: str, language: str = "python") -> str:
    return f"Here it is:\n```{language}\n{code}```\n"


ADD_RIGHT, ADD_WRONG = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"
SQUARE_STDIO = "print(int(input()) ** 2)\n"
SLOW_ADD = "import time\ndef add(a, b):\n    time.sleep(0.5)\n    return a + b\n"
# Rows in several of the formats `code` reads, with a right and a wrong completion each.
ROWS = [
    ({"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}, ADD_RIGHT, ADD_WRONG),
    ({"tests": [{"input": "3\n", "output": "9\n"}, {"input": "-4\n", "output": "16\n"}]}, SQUARE_STDIO,
     "print(int(input()) * 2)\n"),
    ({"prompt": "def add(a, b):\n", "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
      "entry_point": "add"}, "    return a + b\n", "    return a * b\n"),
    ({"tests": ["add(1, 2)"]}, ADD_RIGHT, ADD_WRONG),  # checks nothing: None for any program, with a warning
]


def batch(rows):
    completions, columns = [], {}
    names = sorted({name for row, _, _ in rows for name in row})
    for row, right, wrong in rows:
        for program in (right, wrong, "no code at all"):
            completions.append(fenced(program) if program != "no code at all" else program)
            for name in names:
                columns.setdefault(name, []).append(row.get(name))
    return completions, columns


@pytest.fixture(scope="module")
def two_servers():
    with judge_servers(2, "--workers", "2") as started:
        yield started


def test_served_verdicts_equal_local_ones(two_servers, caplog):
    completions, columns = batch(ROWS)
    local = CodeReward(timeout=2.0)
    served = CodeReward(timeout=2.0, executor=[url for url, _ in two_servers], executor_token=TOKEN)
    assert served.sandbox is None  # no program runs on the trainer's machine
    local_scores = local(completions=completions, **columns)
    with caplog.at_level("WARNING"):
        served_scores = served(completions=completions, **columns)
    assert served_scores == local_scores
    assert served_scores[:9] == [1.0, 0.0, 0.0] * 3 and served_scores[9:] == [None] * 3
    assert "check nothing" in caplog.text  # the server's warning reaches the trainer's log
    for row, right, wrong in ROWS[:3]:
        for program in (right, wrong):
            here, there = local.evaluate_row(fenced(program), row), served.evaluate_row(fenced(program), row)
            assert [(o.passed, o.status) for o in here.outcomes] == [(o.passed, o.status) for o in there.outcomes]


@pytest.mark.skipif(cpp_compiler() is None, reason="g++ is needed for C++ rows (apt-get install g++)")
def test_served_cpp_rows(two_servers):
    program = "#include <iostream>\nint main() { long x; std::cin >> x; std::cout << x * x << std::endl; }\n"
    row = {"tests": [{"input": "7\n", "output": "49\n"}]}
    served = CodeReward(language="cpp", executor=two_servers[0][0], executor_token=TOKEN)
    assert served(completions=[fenced(program, "cpp"), fenced(program.replace("x * x", "x + x"), "cpp")],
                  tests=[row["tests"]] * 2) == [1.0, 0.0]


def test_a_wrong_token_runs_nothing(two_servers):
    url = two_servers[0][0]
    body = json.dumps({"completion": fenced(ADD_RIGHT), "row": ROWS[0][0]})
    for token in ("", "wrong-token-0123456789"):
        response = requests.post(f"{url}/v1/judge", data=body, headers=headers(token), timeout=10)
        assert response.status_code == 401 and "token" in response.json()["error"]
    with pytest.raises(ValueError, match="refuses the token"):
        CodeReward(executor=url, executor_token="wrong-token-0123456789")
    assert requests.get(f"{url}/v1/info", headers=headers("nope"), timeout=10).status_code == 401
    assert requests.get(f"{url}/health", timeout=10).json()["status"] == "ok"  # needs no token


def test_bad_requests_get_4xx_naming_the_field_and_the_server_keeps_serving(two_servers):
    url = two_servers[0][0]
    cases = [
        (b"{not json", 400, None),
        (json.dumps([1, 2]).encode(), 422, "body"),
        (json.dumps({"completion": 3, "row": {}}).encode(), 422, "completion"),
        (json.dumps({"completion": "x", "row": {}, "extra": 1}).encode(), 422, "extra"),
        (json.dumps({"completion": "x", "row": {}, "reward": {"isolation": "none"}}).encode(), 422, "reward.isolation"),
        (json.dumps({"completion": "x", "row": {}, "reward": {"timeout": 1e9}}).encode(), 422, "reward.timeout"),
        (json.dumps({"completion": "x", "row": {}, "reward": {"max_processes": 10**6}}).encode(), 422,
         "reward.max_processes"),
        (json.dumps({"completion": "x", "row": {}, "reward": {"scoring": "nonsense"}}).encode(), 422, "reward"),
        (b"[" * 100_000, 400, None),  # nested past the parser's recursion limit
        # The compiler also precompiles headers on the server's host: no flag that runs or reads anything there.
        (json.dumps({"completion": "x", "row": {}, "reward": {"cpp_flags": ["-wrapper", "/bin/sh,-c,id"]}}).encode(),
         422, "reward.cpp_flags"),
    ]
    for body, status, field in cases:
        response = requests.post(f"{url}/v1/judge", data=body, headers=headers(), timeout=30)
        assert response.status_code == status, (body[:60], response.text)
        if field is not None:
            assert response.json()["field"] == field
    served = CodeReward(executor=url, executor_token=TOKEN)
    assert served(completions=[fenced(ADD_RIGHT)], tests=[ROWS[0][0]["tests"]]) == [1.0]


def test_an_oversized_request_is_refused_unread():
    url, process = start_server("--max-request-mb", "0.01")
    try:
        big = json.dumps({"completion": "x" * 20_000, "row": {}}).encode()
        assert requests.post(f"{url}/v1/judge", data=big, headers=headers(), timeout=10).status_code == 413

        def chunks():  # no Content-Length: refused once the limit has arrived
            for _ in range(40):
                yield b" " * 1000

        assert requests.post(f"{url}/v1/judge", data=chunks(), headers=headers(), timeout=10).status_code == 413
        served = CodeReward(executor=url, executor_token=TOKEN)
        assert served(completions=[fenced(ADD_RIGHT)], tests=[ROWS[0][0]["tests"]]) == [1.0]
    finally:
        stop(process)


def test_a_slow_client_does_not_hold_up_the_others(two_servers):
    url = two_servers[0][0]
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as slow:
        slow.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                     + b"\r\nContent-Length: 100000\r\n\r\n{\"completion\": ")  # and then nothing
        served = CodeReward(executor=url, executor_token=TOKEN)
        started = time.monotonic()
        assert served(completions=[fenced(ADD_RIGHT)], tests=[ROWS[0][0]["tests"]]) == [1.0]
        assert time.monotonic() - started < 10


def test_a_busy_server_answers_503_and_the_client_waits():
    url, process = start_server("--workers", "1", "--max-queue", "0")
    try:
        body = json.dumps({"completion": fenced(SLOW_ADD), "row": ROWS[0][0]})
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(
            requests.post(f"{url}/v1/judge", data=body, headers=headers(), timeout=60))) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses[0] == 200 and 503 in statuses
        assert all(a.headers.get("Retry-After") for a in answers if a.status_code == 503)
        # The reward's client keeps no more in flight than the server's capacity, and waits for it: all judged.
        served = CodeReward(executor=url, executor_token=TOKEN)
        assert served(completions=[fenced(SLOW_ADD)] * 4, tests=[ROWS[0][0]["tests"]] * 4) == [1.0] * 4
    finally:
        stop(process)


def distinct_slow_programs(count: int) -> list[str]:
    """Right programs that take a moment, all different (so that none is judged once for several rows)."""
    return [fenced(SLOW_ADD + f"# program {index}\n") for index in range(count)]


@pytest.mark.parametrize("fault", ["killed", "hung"])
def test_a_server_that_dies_or_hangs_mid_batch_loses_no_verdict(fault):
    with judge_servers(2, "--workers", "2") as started:
        (victim_url, victim), (_, _) = started
        served = CodeReward(executor=[url for url, _ in started], executor_token=TOKEN, executor_timeout=4.0)

        def strike():
            time.sleep(0.3)
            os.kill(victim.pid, signal.SIGKILL if fault == "killed" else signal.SIGSTOP)

        striker = threading.Thread(target=strike)
        striker.start()
        programs = distinct_slow_programs(8)
        scores = served(completions=programs, tests=[ROWS[0][0]["tests"]] * 8)
        striker.join()
        assert scores == [1.0] * 8  # no right program scores 0, none is lost


def test_a_job_longer_than_the_silence_timeout_is_judged_not_retried(two_servers):
    # The server sends a space every 2 s while it judges: a job of 3 tests x 2 s is not taken for a hung server
    # (a wrong program looping on every test must score 0, not None after every server "timed out").
    served = CodeReward(timeout=2.0, executor=[url for url, _ in two_servers], executor_token=TOKEN,
                        executor_timeout=3.0)
    looping = "def add(a, b):\n    while True:\n        pass\n"
    slow_right = "import time\ndef add(a, b):\n    time.sleep(1.5)\n    return a + b\n"
    tests = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(3, 2) == 5"]
    assert served(completions=[fenced(looping), fenced(slow_right)], tests=[tests] * 2) == [0.0, 1.0]


def test_no_server_left_gives_none_with_a_warning_naming_them(caplog):
    with judge_servers(2) as started:
        served = CodeReward(executor=[url for url, _ in started], executor_token=TOKEN, executor_timeout=3.0)
        for _, process in started:
            process.kill()
            process.wait()
        with caplog.at_level("WARNING"):
            scores = served(completions=[fenced(ADD_RIGHT)], tests=[ROWS[0][0]["tests"]])
    assert scores == [None]
    assert "no judge server could judge it" in caplog.text
    assert all(url in caplog.text for url, _ in started)


def test_a_client_names_unreachable_servers_before_training():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match="no judge server answers"):
        CodeReward(executor=url, executor_token=TOKEN)
    with pytest.raises(ValueError, match="executor"):
        CodeReward(executor="ftp://nowhere", executor_token=TOKEN)


def test_sigterm_drains_jobs_in_flight():
    url, process = start_server("--workers", "2")
    try:
        body = json.dumps({"completion": fenced(SLOW_ADD), "row": ROWS[0][0]})
        answer = {}
        job = threading.Thread(target=lambda: answer.setdefault(
            "response", requests.post(f"{url}/v1/judge", data=body, headers=headers(), timeout=60)))
        job.start()
        deadline = time.monotonic() + 30
        while requests.get(f"{url}/health", timeout=5).json()["in_flight"] == 0:  # the job is in the server
            assert time.monotonic() < deadline, "the job never reached the server"
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        job.join()
        assert answer["response"].status_code == 200 and answer["response"].json()["score"] == 1.0
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn ends by the signal it drained for
        log = log_of(process)
        assert '"event": "judge", "status": 200' in log
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{url}/health", timeout=2)
    finally:
        stop(process)


def test_serve_refuses_to_start_without_a_token():
    result = subprocess.run(
        [sys.executable, "-m", "trl_ext.cli", "sandbox", "serve", "--port", str(free_port())],
        env={**environment(), "TRL_EXT_JUDGE_TOKEN": ""}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and "TRL_EXT_JUDGE_TOKEN" in result.stderr


def test_the_served_reward_pickles():
    import pickle

    with judge_servers(1) as [(url, _)]:
        served = pickle.loads(pickle.dumps(CodeReward(executor=url, executor_token=TOKEN)))
        assert served(completions=[fenced(ADD_RIGHT)], tests=[ROWS[0][0]["tests"]]) == [1.0]
