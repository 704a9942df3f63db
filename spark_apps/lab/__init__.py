"""The chaos lab: real faults against real processes, and the exactly-once checker."""
