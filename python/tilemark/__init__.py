"""tilemark: how much real application load a storage system carries at once."""

__version__ = "0.1.0"
