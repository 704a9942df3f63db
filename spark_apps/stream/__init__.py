"""The Kappa layer: the Structured Streaming job and its fault-injection hook."""
