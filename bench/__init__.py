"""`make bench`: throughput, latency, micro-batch cost and audit time of the platform next to this machine's limit."""
