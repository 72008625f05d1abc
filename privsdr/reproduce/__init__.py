"""Reproductions of the papers' tables and figures: ``privsdr reproduce --list``."""
from . import (
    dpbcd_realdata,
    dpbcd_tables,
    dpsir_tables,
    edpls_attack,
    edpls_figures,
    fsir_figures,
    fsir_flights,
    fsir_tables,
    pride_figures,
    pride_tables,
)

REPRODUCTIONS = {
    **{name: (dpsir_tables, title) for name, (_, _, title) in dpsir_tables.TABLES.items()},
    **{name: (fsir_tables, title) for name, (_, _, title) in fsir_tables.TABLES.items()},
    **{name: (fsir_figures, title) for name, title in fsir_figures.FIGURES.items()},
    **{name: (fsir_flights, title) for name, title in fsir_flights.FIGURES.items()},
    **{name: (dpbcd_tables, title) for name, (_, _, title) in dpbcd_tables.TABLES.items()},
    **{name: (dpbcd_realdata, title) for name, title in dpbcd_realdata.FIGURES.items()},
    **{name: (edpls_figures, title) for name, title in edpls_figures.FIGURES.items()},
    **{name: (edpls_attack, title) for name, title in edpls_attack.FIGURES.items()},
    **{name: (pride_tables, title) for name, title in pride_tables.TABLES.items()},
    **{name: (pride_figures, title) for name, title in pride_figures.FIGURES.items()},
}

__all__ = ["REPRODUCTIONS", "dpbcd_realdata", "dpbcd_tables", "dpsir_tables", "edpls_attack", "edpls_figures", "fsir_figures",
           "fsir_flights", "fsir_tables", "pride_figures", "pride_tables"]
