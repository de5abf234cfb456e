"""xbackend's conformance tests: what every backend, built in or a plugin, must do.

Run them against a backend with the pytest plugin (``xbackend.pytest_plugin``)::

    pytest --pyargs xbackend.conformance --backend NAME

Every variant of every operation equals the float64 reference within the
tolerance on seeded, odd-sized operands (outputs are NaN-poisoned before each run,
so a missed element fails); int32 equals it exactly, on operands whose sums pass 2**24
(where float32 stops being exact); each shape and dtype runs on two fresh operand sets
(a remembered result fails); bad operands are ``UnsupportedParameter``; strided views
and zero-sized dimensions give NumPy's answer; ``close()`` ends the backend.
"""
