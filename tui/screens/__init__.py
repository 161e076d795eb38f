"""The cockpit's screens, one module each; each is a mode of the app (keys 1-7)."""
