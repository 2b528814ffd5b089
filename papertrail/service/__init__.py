"""The service every program builds on: the application context, logging, locks and source claims,
and ``papertrail run``'s roles (runtime, worker)."""
