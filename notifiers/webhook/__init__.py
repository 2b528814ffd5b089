"""The webhook channel: its address rules, settings, formatting and sending."""
