"""Benchmark harness: fake upstream, bare proxy, load generators and targets (see bench/README.md)."""
