"""tilemark: how much real application load a storage system carries at once."""

try:
    # One version for the package and the engine: the Cargo workspace's, exported by the engine.
    from tilemark._engine import __version__
except ImportError:  # a source checkout without `make build`
    __version__ = "0+unbuilt"
