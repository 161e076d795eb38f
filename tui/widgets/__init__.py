"""Widgets and their pure renderers (tested without an app)."""
