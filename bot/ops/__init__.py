"""Readiness: preflight checks, self-timing, hatches (flags that turn off a fast path), /ready."""
