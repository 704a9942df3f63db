"""`make bench`: throughput, latency, recompute and MERGE cost of the platform next to this machine's limit."""
