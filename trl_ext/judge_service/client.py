"""The `code` reward as a client of judge servers (`trl-ext sandbox serve`): `CodeReward(executor=...)`.

A batch is spread over the servers by load: each job goes to the server with the fewest jobs in flight for its
capacity (twice its workers: one job waits in its queue for each being judged), and no server is sent more than
its capacity at once (the client waits instead: back-pressure). A job
whose server dies, refuses the connection, answers 5xx or stays silent longer than `silence_timeout` (a server
sends a space every two seconds while it judges, so a long job is not taken for a hung server) is sent to another
server (that server rests for `cooldown` seconds); a server that is busy (503) is asked again after a pause. A job
that no server could judge scores None with a warning naming each server and its error: never 0, never lost.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..sandbox.testing import CodeTestReport
from .connections import FAULTS, KeptConnections
from .protocol import job_payload, report_from_json, with_index

__all__ = ["JudgeServers", "TOKEN_VARIABLE", "parse_executor"]

TOKEN_VARIABLE = "TRL_EXT_JUDGE_TOKEN"
_MAX_CLIENT_THREADS = 64


def parse_executor(spec: str | Sequence[str]) -> list[str]:
    """The servers' base URLs in `executor`: a URL, a comma-separated list of them, a list, or a file listing
    one per line (blank lines and `#` comments ignored)."""
    items = [spec] if isinstance(spec, str) else list(spec)
    urls: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if part.startswith(("http://", "https://")):
                urls.append(part.rstrip("/"))
            elif os.path.isfile(part):
                with open(part, encoding="utf-8") as file:
                    lines = [line.split("#", 1)[0].strip() for line in file]
                urls.extend(parse_executor([line for line in lines if line]))
            else:
                raise ValueError(
                    f"Reward 'code': executor {part!r} is neither 'local', an http(s):// URL of a judge server "
                    "(`trl-ext sandbox serve`), nor a file listing such URLs."
                )
    if not urls:
        raise ValueError("Reward 'code': executor names no judge server URL.")
    return urls


# Busy answers (503) one job takes before it gives up: about ten minutes of servers that never have room.
_MAX_BUSY_ANSWERS = 1200


@dataclass
class _Server:
    url: str
    capacity: int = 1
    in_flight: int = 0
    resting_until: float = 0.0


class JudgeServers:
    """Judge servers at `urls`, reached with the shared secret `token` (default: `$TRL_EXT_JUDGE_TOKEN`)."""

    def __init__(
        self, urls: Sequence[str], token: str | None = None, *, silence_timeout: float = 30.0, cooldown: float = 2.0,
        connect_timeout: float = 5.0,
    ):
        self.servers = [_Server(url) for url in urls]
        self.token = token if token is not None else os.environ.get(TOKEN_VARIABLE)
        if not self.token:
            raise ValueError(
                f"Reward 'code': judge servers need their shared secret: set {TOKEN_VARIABLE} (as for "
                "`trl-ext sandbox serve`) or pass executor_token."
            )
        self.silence_timeout, self.cooldown, self.connect_timeout = silence_timeout, cooldown, connect_timeout
        self._http = KeptConnections(connect_timeout)
        self._available = threading.Condition()
        self._pool: ThreadPoolExecutor | None = None

    def __getstate__(self):  # a reward pickles with its settings; connections and locks start anew
        state = {**self.__dict__, "servers": [_Server(s.url, s.capacity) for s in self.servers]}
        for name in ("_available", "_pool"):
            del state[name]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state, _available=threading.Condition(), _pool=None)

    # ------------------------------------------------------------------------------------------ checks

    def check(self) -> None:
        """Ask every server who it is (with the token), before training: raises naming the servers when none
        answers, or when one refuses the token."""
        errors = {}
        for server in self.servers:
            try:
                response = self._http.request(server.url, "GET", "/v1/info", None, self._headers(),
                                              self.connect_timeout)
            except FAULTS as error:
                errors[server.url] = _short(error)
                continue
            if response.status_code == 401:
                raise ValueError(
                    f"Reward 'code': the judge server {server.url} refuses the token: give the client the server's "
                    f"{TOKEN_VARIABLE} (or executor_token)."
                )
            if response.status_code != 200:
                errors[server.url] = f"HTTP {response.status_code}"
                continue
            info = json.loads(response.body)
            # Twice its workers: the next job waits in the server's queue while one is answered, so no worker
            # idles for a round trip (the queue holds at least that many: `--max-queue` 64 by default).
            workers = max(1, int(info.get("workers", 1)))
            server.capacity = workers + min(workers, int(info.get("max_queue", workers)))
        if len(errors) == len(self.servers):
            raise ConnectionError(
                "Reward 'code': no judge server answers: " + "; ".join(f"{url}: {why}" for url, why in errors.items())
                + ". Start them with `trl-ext sandbox serve` (see docs/rewards/judge-servers.md)."
            )

    # ------------------------------------------------------------------------------------------ a batch

    def score(
        self, texts: Sequence[str], rows: Sequence[Mapping[str, Any]], languages: Sequence[Any],
        settings: Mapping[str, Any], warn: Callable[[str], None],
    ) -> list[tuple[float | None, CodeTestReport | None]]:
        """(score, report) per row, judged by the servers; the servers' warnings go to `warn`."""
        jobs: dict[bytes, list[int]] = {}  # the same completion on the same row is judged once
        for index, (text, row, language) in enumerate(zip(texts, rows, languages)):
            jobs.setdefault(job_payload(text, row, language, settings), []).append(index)
        results: list[tuple[float | None, CodeTestReport | None]] = [(None, None)] * len(texts)
        if self._pool is None:  # kept between batches, and so are its threads' connections
            capacity = min(_MAX_CLIENT_THREADS, sum(server.capacity for server in self.servers))
            self._pool = ThreadPoolExecutor(max_workers=max(1, capacity), thread_name_prefix="judge-client")
        bodies = [with_index(payload, indices[0]) for payload, indices in jobs.items()]
        for indices, answer in zip(jobs.values(), self._pool.map(self._judge, bodies)):
            if isinstance(answer, str):
                warn(f"row {indices[0]} of the batch: no judge server could judge it ({answer}); such rows "
                     "score None (cannot judge). Check the servers (`curl <url>/health`) and their logs.")
                continue
            for message in answer["warnings"]:
                warn(message)
            result = (answer["score"], answer["report"])
            for index in indices:
                results[index] = result
        return results

    def _judge(self, body: bytes) -> dict[str, Any] | str:
        """The server's answer for one job, or why no server could give one."""
        errors: dict[str, str] = {}
        busy = 0
        while len(errors) < len(self.servers) + 1 and busy < _MAX_BUSY_ANSWERS:
            server = self._take(errors)
            try:
                response = self._http.request(server.url, "POST", "/v1/judge", body, self._headers(),
                                              self.silence_timeout)
                answer = _judged_job(response.body) if response.status_code == 200 else None
            except FAULTS as error:  # died, refused, silent past silence_timeout, broke its answer
                self._give_back(server, rest=True)
                errors[_attempt_key(server, errors)] = _short(error)
                continue
            if response.status_code == 503:  # busy: ask again after a pause, elsewhere if possible
                self._give_back(server, rest=False)
                busy += 1
                time.sleep(_retry_after(response.retry_after) * random.uniform(0.5, 1))
                continue
            self._give_back(server, rest=response.status_code >= 500)
            if response.status_code == 200:
                return answer
            detail = _error_detail(response)
            if response.status_code >= 500:
                errors[_attempt_key(server, errors)] = detail
                continue
            return f"{server.url}: {detail}"  # refused the job itself (4xx): another server would too
        if not errors:
            return f"every server answered busy {busy} times"
        return "; ".join(f"{url}: {why}" for url, why in errors.items())

    def _take(self, errors: dict[str, str]) -> _Server:
        """The least loaded server with room, preferring those this job has not failed on. Waits for room (jobs in
        flight end: answered, or their server silent past `silence_timeout`) or for a resting server."""
        with self._available:
            while True:
                now = time.monotonic()
                ready = [s for s in self.servers if s.resting_until <= now and s.in_flight < s.capacity]
                fresh = [s for s in ready if s.url not in errors] or ready
                if fresh:
                    server = min(fresh, key=lambda s: (s.in_flight / s.capacity, random.random()))
                    server.in_flight += 1
                    return server
                waits = [s.resting_until - now for s in self.servers if s.resting_until > now]
                self._available.wait(timeout=min([0.5, *waits]))

    def _give_back(self, server: _Server, rest: bool) -> None:
        with self._available:
            server.in_flight -= 1
            if rest:
                server.resting_until = time.monotonic() + self.cooldown
            self._available.notify_all()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}


def _judged_job(body: bytes) -> dict[str, Any]:
    """A server's answer (after its heartbeat spaces), checked: anything else is a fault of that server."""
    answer = json.loads(body)
    score = answer.get("score", "missing") if isinstance(answer, dict) else "missing"
    if not (score is None or (isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score))):
        raise ValueError(str(answer.get("error") if isinstance(answer, dict) else "") or "the answer is not a judged job")
    warnings = answer.setdefault("warnings", [])
    if not (isinstance(warnings, list) and all(isinstance(message, str) for message in warnings)):
        raise ValueError("the answer's warnings are not a list of messages")
    answer["report"] = report_from_json(answer.get("report"))
    return answer


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 0.2), 0.05), 1.0)
    except ValueError:  # an HTTP date, or nonsense
        return 0.5


def _attempt_key(server: _Server, errors: dict[str, str]) -> str:
    key, n = server.url, 2
    while key in errors:
        key, n = f"{server.url} (try {n})", n + 1
    return key


def _short(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:200]}"


def _error_detail(response) -> str:
    try:
        return f"HTTP {response.status_code}: {json.loads(response.body).get('error', '')}"[:300]
    except (ValueError, AttributeError):
        return f"HTTP {response.status_code}"
