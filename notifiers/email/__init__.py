"""The email channel: its address rules, settings, formatting and sending."""
