"""τ²-bench (sierra-research/tau2-bench) served as mcpworld worlds: see `package.py` and docs/tau2.md."""
