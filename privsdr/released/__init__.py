"""Released statistics: the one record every release path produces, and the post-processing that reads it."""
from .fitted import Diagnostic, Fitted
from .record import Released, from_run, noise_sd

__all__ = ["Diagnostic", "Fitted", "Released", "from_run", "noise_sd"]
