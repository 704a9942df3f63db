"""How a pipeline is declared: the public API, its event schema and the determinism guard."""
