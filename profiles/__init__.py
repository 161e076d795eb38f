"""Built-in hardware profiles as TOML data; the schema is ``engine.profiles.Profile``."""
