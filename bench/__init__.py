"""The benchmark of SPEC §12: seeded workload, same-run baselines, figures and their bars.

Run it as ``python -m bench --preset smoke|quick|full`` (``make bench-smoke``, ``make
bench``, ``make bench-full``). It is not part of the tests: only the smoke preset runs in
CI, to prove the harness works, and it asserts nothing about speed.
"""
