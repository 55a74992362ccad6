"""The benchmarks behind ``sgam bench``; the method and the figures are in README.md next to them.

common.py is the shared toolkit, workload.py the shared workload vocabulary, oracle.py the one
temporal oracle the benchmarks and the tests check answers against.
"""
