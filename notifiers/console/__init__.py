"""The console channel: its address rules, settings, formatting and sending."""
