"""Reusable constructs: one per file, keyword-only typed props, attributes for what others need."""
