"""Speculative decoding with otlp: draft trees, verification and the decode loop."""
