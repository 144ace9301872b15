"""Test-wide settings: Hypothesis runs derandomized so CI is repeatable."""

from hypothesis import settings

settings.register_profile("kueued", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("kueued")
