"""Widgets the screens compose: schema form, tool console, state browser, JSON-RPC log."""
