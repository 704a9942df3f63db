"""Day-2 operations: Delta maintenance and stream supervision."""
