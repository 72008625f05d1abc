"""Released statistics: the one record every release path produces, and the post-processing that reads it."""
from .record import Released, from_run, noise_sd

__all__ = ["Released", "from_run", "noise_sd"]
