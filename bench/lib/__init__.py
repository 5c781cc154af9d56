"""Shared machinery of the benchmarks: the production-shaped stack and a browser-like participant."""
