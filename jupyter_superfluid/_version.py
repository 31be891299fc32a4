"""The package version, in a leaf module so that importing it imports nothing else."""

__version__ = "0.1.0"
