"""Helpers the tests share: streams, expected rows, a webhook receiver, a test-only pipeline."""
