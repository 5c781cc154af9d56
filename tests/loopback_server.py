"""The loopback HTTP servers a test starts and stops itself (pytest-httpserver's `HTTPServer`)."""

from pytest_httpserver import HTTPServer


class LoopbackServer(HTTPServer):
    """An `HTTPServer` that stops at once. werkzeug's serving loop checks for a stop request every half second,
    so each `stop()` waited about 0.5 s, once per test for the loopback Prolific and the extra loopback
    providers (some 25 s over the suite). This loop checks every 10 ms; what it serves is the same."""

    POLL_SECONDS = 0.01

    def thread_target(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=self.POLL_SECONDS)
