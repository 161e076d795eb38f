"""The headless CLI (`tui <command>`): a peer of the cockpit over the same engine.

Exit codes: 0 ok, 1 run failed or incorrect (or a check failed), 2 bad input, 3 no usable GPU/backend."""
