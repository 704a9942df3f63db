"""What a command acts on: a pipeline, its active generation and everything named after them, resolved once."""
