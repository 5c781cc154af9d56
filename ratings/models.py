"""Models of the ratings app: none of its own (the participant's rows live in studies/). The benchmark floor's
table moved to the benchmark targets (bench/targets/), which production does not install."""
