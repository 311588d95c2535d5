"""Exported models: SavedModels with serving signatures (``run.py --mode=export``)."""
