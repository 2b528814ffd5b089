"""Delivery: the notifier contract, planning and sending digests, rendering them, schedules, receipts, Atom
feeds."""
