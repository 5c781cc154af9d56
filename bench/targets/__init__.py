"""The benchmark targets: a Django app installed only while BENCH_FLOOR_ENABLED=1 (see config/settings.py).

Production never installs it, so its model has no table there and its URLs do not exist (404). The
benchmarks under bench/ start their stack with the setting on (bench/lib/stack.py); the test suite
(DJANGO_ENV=test) has it on by default.
"""
