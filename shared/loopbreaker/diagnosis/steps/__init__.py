"""The four steps of the workflow, one module each, and what they share (pure)."""
