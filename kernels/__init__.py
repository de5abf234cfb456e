"""Kernel sources (``cuda/*.cu``, ``opencl/*.cl``), shipped inside the package as data."""
