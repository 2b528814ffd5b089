"""The apprise channel: its address rules, settings, formatting and sending."""
