"""``xbackend profile``: what CUDA kernels do, counted by Nsight Compute.

The modules: ``metrics`` (the counters asked for, their units, how a product's kernels
add up), ``ncu`` (the tool: its command lines, version, settings, and its CSV read in
base units), ``child`` (the program ncu runs: each point's product once, checked, and a
manifest of what ran), ``launches`` (ncu's kernels matched to the points, and the
points' records), ``session`` (one profile, start to end), ``needs`` (what each backend
and machine would need to be profiled) and ``table`` (the console table and
``counters.csv``). The figures are ``xbackend/figures/counters.py``.
"""
