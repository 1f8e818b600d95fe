"""Helpers every area's checks share: warehouse catalog, great-expectations runner, secret scan."""
