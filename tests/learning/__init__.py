"""learning tests."""
