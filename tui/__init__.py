"""SOL Cockpit's Textual front end. Thin: it talks only to the engine's public surface."""
