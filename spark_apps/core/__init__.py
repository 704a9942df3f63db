"""Errors, settings, progress and code version: what every other package stands on."""
