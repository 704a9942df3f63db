"""Kappa platform that proves itself against a Lambda batch auditor."""
