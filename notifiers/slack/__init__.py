"""The slack channel: its address rules, settings, formatting and sending."""
