"""`trl-ext sandbox serve`: the `code` reward's judge as an HTTP service (Starlette on uvicorn).

Each job is judged by `CodeReward.score_row`, the code that judges a row locally, in the sandboxes of this
machine, so every guarantee of the local judge holds (see docs/rewards/sandbox.md). Safe to expose by default:

- bound to 127.0.0.1 unless `--host` says otherwise; every route but `/health` needs the shared secret
  (`Authorization: Bearer <token>`, compared in constant time), checked before the body is read: a wrong
  token runs nothing (401);
- a request larger than `max_request_bytes` is refused (413) without reading it whole; a body that is not a
  job gets 400 (not JSON) or 422 (naming the field); the server keeps serving;
- at most `workers` jobs are judged at once and `max_queue` more wait; beyond that 503 with `Retry-After`
  (the client sends the job elsewhere or later);
- SIGTERM drains: no new connection is accepted, jobs in flight finish and are answered, then the sandboxes
  end (uvicorn's graceful shutdown, then the lifespan's);
- a job's answer is streamed: a space every two seconds while it is judged, then the JSON; so a client tells a
  hung server (silent) from a long job, and a server's fault while judging comes as `{"error"}` (another server
  is asked);
- one JSON line per request on stderr (`event`, `status`, `seconds`, `score`, `tests`, client address); refused
  tokens at most once a second.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from .protocol import PROTOCOL_VERSION, JobError, parse_job, report_to_json

__all__ = ["ServeOptions", "create_app", "serve"]

# Where the JSON lines go (stderr, line-buffered), and when a refused token was last written there.
_LOG = sys.stderr
_LAST_REFUSAL = [0.0]
# Seconds between the spaces a server sends while a job is judged.
HEARTBEAT_SECONDS = 2.0


@dataclass(frozen=True)
class ServeOptions:
    """How a judge server runs; the command line's flags (`trl-ext sandbox serve --help`)."""

    token: str
    workers: int = 1
    isolation: str = "auto"
    max_queue: int = 64
    max_request_bytes: int = 16 << 20
    max_timeout: float = 60.0
    max_memory_mb: int = 4096


class _Judge:
    """The rewards that judge jobs, one per distinct set of job settings (a few kept, the oldest closed)."""

    def __init__(self, options: ServeOptions):
        self.options = options
        self.pool = ThreadPoolExecutor(max_workers=options.workers, thread_name_prefix="judge")
        self.rewards: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()  # the workers share the rewards
        self.in_flight = 0

    def reward_for(self, settings: dict[str, Any]):
        from ..rewards.code import CodeReward

        key = json.dumps(settings, sort_keys=True, default=list)
        with self.lock:
            if key not in self.rewards:
                self.rewards[key] = CodeReward(**settings, isolation=self.options.isolation, num_workers=1,
                                               reuse_sandbox=True)
                while len(self.rewards) > 4:
                    _close(self.rewards.popitem(last=False)[1])
            self.rewards.move_to_end(key)
            return self.rewards[key]

    def judge(self, reward, job: dict[str, Any]) -> dict[str, Any]:
        from ..rewards.code_warnings import collected_warnings

        with collected_warnings() as warnings:
            score, report = reward.score_row(job["completion"], job["row"], job["language"], job["index"])
        return {"score": score, "report": report_to_json(report), "warnings": warnings}

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for reward in self.rewards.values():
            _close(reward)
        self.rewards.clear()


def _close(reward) -> None:
    """End the reused sandboxes of a reward, those judging now as they come back (`server_pool._give_back`)."""
    from ..sandbox.testing import close_servers

    for sandbox in (reward.sandbox, reward._site_sandbox):
        if sandbox is not None:
            close_servers(sandbox)


def create_app(options: ServeOptions):
    """The Starlette application of one judge server."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    from ..rewards.code import CodeReward

    judge = _Judge(options)
    # Raises here, before serving, when this machine cannot isolate programs.
    isolation = CodeReward(isolation=options.isolation).sandbox.describe()
    expected = f"Bearer {options.token}".encode()

    def authorized(request) -> bool:
        return hmac.compare_digest(request.headers.get("authorization", "").encode(), expected)

    def error(status: int, message: str, **fields) -> JSONResponse:
        return JSONResponse({"error": message, **fields}, status_code=status)

    async def health(request):
        return JSONResponse({"status": "ok", "in_flight": judge.in_flight, "workers": options.workers})

    async def info(request):
        if not authorized(request):
            return error(401, "missing or wrong token")
        from .. import __version__

        return JSONResponse({"protocol": PROTOCOL_VERSION, "version": __version__, "isolation": isolation,
                             "workers": options.workers, "max_queue": options.max_queue,
                             "max_timeout": options.max_timeout, "max_memory_mb": options.max_memory_mb})

    async def judge_job(request):
        started = time.monotonic()
        if not authorized(request):
            return _logged(request, started, error(401, "missing or wrong token"))
        if judge.in_flight >= options.workers + options.max_queue:  # before reading anything more
            response = error(503, "busy: every worker and queue place is taken")
            response.headers["Retry-After"] = "1"
            return _logged(request, started, response)
        judge.in_flight += 1  # this request's place, given back when its job ends or it is refused
        answer = None
        try:
            refusal, job, reward = await _accepted(request, judge, options)
            if refusal is not None:
                return _logged(request, started, refusal)
            answer = asyncio.get_running_loop().run_in_executor(judge.pool, judge.judge, reward, job)
            answer.add_done_callback(lambda _: setattr(judge, "in_flight", judge.in_flight - 1))
            return StreamingResponse(_heartbeats_then(answer, request, started), media_type="application/json")
        finally:
            if answer is None:
                judge.in_flight -= 1

    @asynccontextmanager
    async def lifespan(app):
        yield
        judge.close()  # after uvicorn has answered every job in flight (graceful shutdown)

    return Starlette(routes=[Route("/health", health), Route("/v1/info", info),
                             Route("/v1/judge", judge_job, methods=["POST"])], lifespan=lifespan)


async def _accepted(request, judge: _Judge, options: ServeOptions):
    """`(refusal, job, reward)`: the job in the request and the reward that judges it, or the error response that
    refuses it (413 too large, 400 not JSON, 422 not a job or settings `CodeReward` refuses, 500 this server cannot)."""
    from starlette.responses import JSONResponse

    body = await _read_limited(request, options.max_request_bytes)
    if body is None:
        return JSONResponse({"error": f"the request is over {options.max_request_bytes} bytes"}, 413), None, None
    try:
        job = parse_job(json.loads(body), options.max_timeout, options.max_memory_mb)
    except JobError as problem:
        return JSONResponse({"error": str(problem), "field": problem.field}, 422), None, None
    except (ValueError, RecursionError):
        return JSONResponse({"error": "the body is not JSON"}, 400), None, None
    try:
        reward = await asyncio.get_running_loop().run_in_executor(judge.pool, judge.reward_for, job["settings"])
    except (TypeError, ValueError) as problem:  # CodeReward refused the job's settings: so would any server
        return JSONResponse({"error": str(problem), "field": "reward"}, 422), None, None
    except Exception as problem:  # noqa: BLE001 - this server cannot (no g++, no sandbox): another may
        return JSONResponse({"error": f"this server cannot judge it: {problem}"}, 500), None, None
    return None, job, reward


async def _read_limited(request, limit: int) -> bytes | None:
    """The body, or None past `limit` bytes (by its declared length, or once that many have arrived)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


async def _heartbeats_then(answer: asyncio.Future, request, started: float):
    """The body of a judged job: a space every `HEARTBEAT_SECONDS` while it is judged (JSON allows them; the
    client takes a server silent for longer than its `executor_timeout` for hung, however long a job may take),
    then the answer, or `{"error"}` if judging failed (the client then sends the job to another server)."""
    while not answer.done():
        await asyncio.wait({answer}, timeout=HEARTBEAT_SECONDS)
        if not answer.done():
            yield b" "
    try:
        result = answer.result()
    except Exception as problem:  # noqa: BLE001 - a fault of this server, reported in the body (200 was sent)
        result = {"error": f"judging failed on the server: {type(problem).__name__}: {str(problem)[:200]}"}
    _write_log(request, started, 200, result)
    yield json.dumps(result).encode()


def _logged(request, started: float, response):
    _write_log(request, started, response.status_code, json.loads(response.body))
    return response


def _write_log(request, started: float, status: int, answer: dict) -> None:
    """One JSON line per request on stderr: written as is (through `logging` it cost a quarter of a request).
    Refused tokens are written at most once a second, so that nobody without one can fill the disk."""
    now = time.monotonic()
    if status == 401:
        if now - _LAST_REFUSAL[0] < 1.0:
            return
        _LAST_REFUSAL[0] = now
    record = {"event": "judge", "status": status, "seconds": round(now - started, 4),
              "client": request.client.host if request.client else None}
    if "score" in answer:
        record.update(score=answer["score"], tests=len((answer.get("report") or {}).get("outcomes", ())))
    else:
        record["error"] = answer.get("error")
    _LOG.write(json.dumps(record) + "\n")


def serve(options: ServeOptions, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run a judge server until SIGTERM or SIGINT (then drain)."""
    import uvicorn

    app = create_app(options)
    # Connections beyond `limit_concurrency` get 503 at once: each trainer thread keeps one open per server.
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False,
                limit_concurrency=max(1024, 4 * (options.workers + options.max_queue)),
                timeout_graceful_shutdown=int(options.max_timeout * 4) + 30)
