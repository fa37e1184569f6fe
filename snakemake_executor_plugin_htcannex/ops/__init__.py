"""What an operator reads: the plan, the status board, why a job waits, provenance, the report."""
