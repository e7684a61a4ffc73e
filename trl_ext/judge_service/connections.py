"""HTTP/1.1 exchanges on connections kept alive per thread and per server: what the judge servers' client and the
execution services' executors send their jobs through (standard library only)."""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FAULTS", "KeptConnections", "Response"]

# What makes an exchange unusable: refused, reset, timed out, broken HTTP, JSON that is broken, nested too deep
# or not of the shape asked for.
FAULTS = (OSError, http.client.HTTPException, ValueError, TypeError, KeyError, AttributeError, RecursionError)


@dataclass(frozen=True)
class Response:
    status_code: int
    retry_after: str | None
    body: bytes


class KeptConnections:
    """One kept-alive connection per thread and base URL. `connect_timeout` bounds connecting; each exchange's
    `timeout` bounds every read (so a server streaming its answer slowly is not cut off, a silent one is)."""

    def __init__(self, connect_timeout: float = 5.0):
        self.connect_timeout = connect_timeout
        self._local = threading.local()

    def __getstate__(self):  # connections start anew in another process
        return {"connect_timeout": self.connect_timeout}

    def __setstate__(self, state):
        self.__init__(**state)

    def request(self, url: str, method: str, path: str, body: bytes | None, headers: Mapping[str, str],
                timeout: float) -> Response:
        """One exchange with the server at base `url`. A kept connection the server closed while idle is replaced
        once; any other failure raises one of `FAULTS`."""
        connections = self._local.__dict__.setdefault("connections", {})
        parts = urllib.parse.urlsplit(url)
        for attempt in (0, 1):
            connection = connections.get(url)
            reused = connection is not None
            if connection is None:
                kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
                connection = connections[url] = kind(parts.hostname, parts.port, timeout=self.connect_timeout)
            try:
                if connection.sock is None:
                    connection.connect()
                connection.sock.settimeout(timeout)
                connection.request(method, parts.path + path, body=body, headers=dict(headers))
                response = connection.getresponse()
                answer = Response(response.status, response.getheader("Retry-After"), response.read())
                if response.will_close:
                    connections.pop(url).close()
                return answer
            except FAULTS as error:
                connections.pop(url, None)
                connection.close()
                stale = isinstance(error, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError))
                if not (reused and stale and attempt == 0):
                    raise
        raise AssertionError("unreachable")
