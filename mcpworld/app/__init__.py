"""The application: the command line and `mcpworld up`, composing every layer below."""
