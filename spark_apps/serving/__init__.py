"""Which copy readers get: serving state, blue/green replay, dbt over serving views."""
