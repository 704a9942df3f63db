"""Which copy readers get: serving state, generations, blue/green replay, dbt over serving views."""
