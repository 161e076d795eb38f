"""The cockpit's screens, one module each; each is a mode of the app, listed in ``tui.screen_list``."""
