"""Fake platform servers on 127.0.0.1 for the notifier and bot tests."""
