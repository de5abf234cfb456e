"""A user's script without ``if __name__ == "__main__"``, measuring a user's kernel (of
the family folder its argument names) in a process of its own (tests/test_isolation.py):
it must run once, not once more for the child (multiprocessing's 'spawn' would run it
again there)."""

import sys

import numpy as np

from xbackend import families, get_backend
from xbackend.sweep.configs import Config
from xbackend.sweep.isolation import Isolation

print("started", flush=True)
families.add_folders([sys.argv[1]])
rng = np.random.default_rng(11)
A = rng.standard_normal((9, 7), dtype=np.float32)
B = rng.standard_normal((7, 13), dtype=np.float32)
with get_backend("opencl") as opencl, Isolation(timeout_s=60) as isolation:
    config = Config("opencl", opencl, "mm", "iso_good", 16, "float32")
    measured = isolation.measure(config, A, B, samples=2)
print("equal:", bool(np.allclose(measured.result, A.astype(np.float64) @ B, rtol=1e-5)))
