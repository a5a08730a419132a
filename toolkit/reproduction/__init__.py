"""Published tables as specs, and the runner that reproduces them."""
