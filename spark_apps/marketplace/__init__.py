"""The built-in example pipeline: an online marketplace."""
