"""`run_async(coroutine)`: `asyncio.run` in a thread of its own. The browser tests' Playwright (its sync API) keeps an
event loop running in the main thread for the rest of the session, where `asyncio.run` refuses to start another;
a test that drives async code runs it here, whatever ran before it."""

import asyncio
from concurrent.futures import ThreadPoolExecutor


def run_async(coroutine):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
