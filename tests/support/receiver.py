"""A local HTTP receiver on 127.0.0.1 for notification tests: records every JSON POST, and can
answer the first N with HTTP 500 (a target that fails)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, *, fail_first: int = 0) -> None:
        self.messages: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.failed: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                message = json.loads(body)
                with owner.lock:
                    fail = owner.fail_first > 0
                    if fail:
                        owner.fail_first -= 1
                        owner.failed.append(message)
                    else:
                        owner.messages.append(message)
                        owner.times.append(time.monotonic())
                self.send_response(500 if fail else 200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def received(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.messages)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
