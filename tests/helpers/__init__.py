"""Helpers shared by the test tiers: toy text data, tiny speech corpora, distributed runs."""
