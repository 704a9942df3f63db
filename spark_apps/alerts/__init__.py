"""Alerts to on-call: raise, record and deliver to the configured sinks."""
