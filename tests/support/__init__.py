"""What tests share: helpers, fixtures and constants more than one test module imports."""
