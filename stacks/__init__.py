"""Stacks wire constructs together; decisions come from the plan, never from context."""
