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
- one JSON line per request on stderr (`event`, `status`, `seconds`, `score`, `tests`, client address).
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

# Where the JSON lines go (stderr, line-buffered).
_LOG = sys.stderr


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
        from ..sandbox.testing import close_servers

        key = json.dumps(settings, sort_keys=True, default=list)
        with self.lock:
            if key not in self.rewards:
                self.rewards[key] = CodeReward(**settings, isolation=self.options.isolation, num_workers=1,
                                               reuse_sandbox=True)
                while len(self.rewards) > 4:
                    _, old = self.rewards.popitem(last=False)
                    close_servers(old.sandbox)
            self.rewards.move_to_end(key)
            return self.rewards[key]

    def judge(self, job: dict[str, Any]) -> dict[str, Any]:
        from ..rewards.code_warnings import collected_warnings

        reward = self.reward_for(job["settings"])
        with collected_warnings() as warnings:
            score, report = reward.score_row(job["completion"], job["row"], job["language"], job["index"])
        return {"score": score, "report": report_to_json(report), "warnings": warnings}

    def close(self) -> None:
        from ..sandbox.testing import close_servers

        self.pool.shutdown(wait=True)
        for reward in self.rewards.values():
            close_servers(reward.sandbox)
        self.rewards.clear()


def create_app(options: ServeOptions):
    """The Starlette application of one judge server."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
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
        body = await _read_limited(request, options.max_request_bytes)
        if body is None:
            return _logged(request, started, error(413, f"the request is over {options.max_request_bytes} bytes"))
        try:
            job = parse_job(json.loads(body), options.max_timeout, options.max_memory_mb)
        except (ValueError, RecursionError) as problem:
            if isinstance(problem, JobError):
                return _logged(request, started, error(422, str(problem), field=problem.field))
            return _logged(request, started, error(400, "the body is not JSON"))
        if judge.in_flight >= options.workers + options.max_queue:
            response = error(503, "busy: every worker and queue place is taken")
            response.headers["Retry-After"] = "1"
            return _logged(request, started, response)
        judge.in_flight += 1
        try:
            answer = await asyncio.get_running_loop().run_in_executor(judge.pool, judge.judge, job)
        except (TypeError, ValueError, RuntimeError) as problem:  # CodeReward refused the settings (or lacks g++)
            return _logged(request, started, error(422, str(problem), field="reward"))
        finally:
            judge.in_flight -= 1
        return _logged(request, started, JSONResponse(answer), answer)

    @asynccontextmanager
    async def lifespan(app):
        yield
        judge.close()  # after uvicorn has answered every job in flight (graceful shutdown)

    return Starlette(routes=[Route("/health", health), Route("/v1/info", info),
                             Route("/v1/judge", judge_job, methods=["POST"])], lifespan=lifespan)


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


def _logged(request, started: float, response, answer: dict | None = None):
    record = {"event": "judge", "status": response.status_code, "seconds": round(time.monotonic() - started, 4),
              "client": request.client.host if request.client else None}
    if answer is not None:
        report = answer.get("report") or {}
        record.update(score=answer["score"], tests=len(report.get("outcomes", ())))
    else:
        record["error"] = json.loads(response.body).get("error")
    _LOG.write(json.dumps(record) + "\n")  # a line per job: written as is (the logging module costs 4x more)
    return response


def serve(options: ServeOptions, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run a judge server until SIGTERM or SIGINT (then drain)."""
    import uvicorn

    app = create_app(options)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False,
                timeout_graceful_shutdown=int(options.max_timeout * 4) + 30)
