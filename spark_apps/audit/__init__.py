"""The Lambda auditor: offset-aligned recompute, exact diff, Great Expectations, ledger and report."""
