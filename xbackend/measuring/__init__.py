"""Measuring: how a time is taken, and how far it holds.

``timing`` (the statistics of samples, the rule that stops taking them, the sampling
options and their presets), ``sampler`` (the loop every backend runs: the checked first
run, the warm-up, the timed samples), ``stamps`` (the device's own clock, read inside the
kernels), ``handles`` (what the sampler and the stamps ask of a device), ``monitor`` (the
GPU's clocks, throttling and power through NVML), ``host_load`` (what other processes took
of the host meanwhile) and ``clocks`` (which clock timed a recorded point, and what a
launch cost beyond it).

This room sits below the backends: it imports none of them, nor anything that runs a
sweep, so every backend, built in or a plugin's, measures the same way.
"""
