"""Convolution building blocks with padding masks."""
