"""The commands: `python -m workloads plan|preflight|submit|process|invoke|cost` (cli.py), the rendering of a
plan (report.py), and what reads an account or the SDK."""
