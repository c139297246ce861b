"""The pure domain: values, items, events, commands, decisions and the projection.

Imports only the standard library (and the package's own error tree); no IO, no clock,
no randomness. ``now`` and fresh ids come in through :class:`lifecycle.Context`.
"""
