from django.apps import AppConfig


class BenchTargetsConfig(AppConfig):
    name = "bench.targets"
    label = "bench"  # table bench_floorwrite, migrations as `bench`
    verbose_name = "Benchmark targets"
