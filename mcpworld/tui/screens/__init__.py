"""The TUI's screens: servers (home), one server, trajectories, rollouts, help."""
