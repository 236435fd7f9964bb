"""Benchmarks behind `asyncrecall bench`."""
