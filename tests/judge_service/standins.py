"""Stand-ins for SandboxFusion and Piston, which cannot run on this machine: small servers that speak each
service's HTTP API as its own repository documents it (SandboxFusion: bytedance/SandboxFusion
`sandbox/server/sandbox_api.py` and `sandbox/runners/types.py`; Piston: engineer-man/piston `docs/api-v2.md` and
`readme.md`), running the (test-written) Python programs in trl-ext's sandbox. `faults` makes the next requests
fail as the services do when they fail (HTTP 500, SandboxError, Piston's internal error)."""

from __future__ import annotations

import threading
import time

import uvicorn
from servers import free_port
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from trl_ext.sandbox import Sandbox, SandboxLimits


class StandIn:
    def __init__(self):
        self.sandbox = Sandbox(SandboxLimits(memory=512 << 20))
        self.faults: list[str] = []  # consumed one per request
        self.requests: list[dict] = []

    def run(self, code: str, stdin: str, timeout: float):
        limits = SandboxLimits(memory=512 << 20, wall_time=timeout, cpu_time=timeout)
        return self.sandbox.run_python("main.py", files={"main.py": code}, stdin=stdin, limits=limits)

    async def sandboxfusion(self, request):
        body = await request.json()
        self.requests.append(body)
        fault = self.faults.pop(0) if self.faults else None
        if fault == "http":
            return Response(status_code=500)
        if fault == "service":
            return JSONResponse({"status": "SandboxError", "message": "runner pod evicted", "compile_result": None,
                                 "run_result": None, "executor_pod_name": None, "files": {}})
        if body.get("language") != "python":
            return JSONResponse({"detail": "unsupported in this stand-in"}, status_code=422)
        result = self.run(body["code"], body.get("stdin") or "", float(body.get("run_timeout", 10)))
        status = "TimeLimitExceeded" if result.timed_out else "Finished"
        run = {"status": status, "execution_time": result.wall_time,
               "return_code": None if result.timed_out else result.returncode,
               "stdout": result.stdout.decode(errors="replace"), "stderr": result.stderr.decode(errors="replace")}
        ok = status == "Finished" and result.returncode == 0
        return JSONResponse({"status": "Success" if ok else "Failed", "message": "", "compile_result": None,
                             "run_result": run, "executor_pod_name": None, "files": {}})

    async def piston(self, request):
        body = await request.json()
        self.requests.append(body)
        fault = self.faults.pop(0) if self.faults else None
        if fault == "http":
            return Response(status_code=500)  # Piston answers a failed execution with an empty 500
        if body.get("language") != "python":
            return JSONResponse({"message": f"{body.get('language')}-{body.get('version')} runtime is unknown"},
                                status_code=400)
        if fault == "service":
            stage = {"stdout": "", "stderr": "", "output": "", "code": None, "signal": None, "status": "XX",
                     "message": "internal error"}
            return JSONResponse({"language": "python", "version": "3.12.0", "run": stage})
        result = self.run(body["files"][0]["content"], body.get("stdin", ""), body.get("run_timeout", 3000) / 1000)
        signal = "SIGKILL" if result.timed_out else None
        stage = {"stdout": result.stdout.decode(errors="replace"), "stderr": result.stderr.decode(errors="replace"),
                 "code": None if signal else result.returncode, "signal": signal,
                 "status": "TO" if result.timed_out else ("RE" if result.returncode else None),
                 "message": "Timeout" if result.timed_out else None}
        stage["output"] = stage["stdout"] + stage["stderr"]
        return JSONResponse({"language": "python", "version": "3.12.0", "run": stage})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/run_code", self.sandboxfusion, methods=["POST"]),
                                 Route("/api/v2/execute", self.piston, methods=["POST"])])


class Serving:
    """A stand-in on a free loopback port, in a thread of this process."""

    def __init__(self):
        self.standin = StandIn()
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.standin.app(), host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
