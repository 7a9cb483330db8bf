"""Waymark."""
