"""Test fixtures and stand-ins shipped for tests and benchmarks (not policies anyone evaluates)."""
