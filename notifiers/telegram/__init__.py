"""The telegram channel: its address rules, settings, formatting and sending."""
