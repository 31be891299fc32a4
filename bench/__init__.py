"""Benchmarks of jupyter_superfluid side by side with llama-cpp-python and its server.

``python -m bench`` builds a random-weight model of realistic shape, starts the
servers it compares on loopback, runs each scenario with warm-up and
repetitions, and writes ``bench/results/<date>.json`` and ``<date>.md``.
Every number is reported beside a baseline measured in the same run, as a
ratio: the machines are shared and noisy, so absolute times do not compare
from run to run. Benchmarks are not tests; ``tests/bench`` only checks that
the harness runs and writes well-formed results.
"""
