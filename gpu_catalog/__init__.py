"""The catalog (GPUs, models, dtypes, engines, support matrix) and published measurements, as data."""

from gpu_catalog.loader import Catalog, CatalogError, load_catalog, load_measurements

__all__ = ["Catalog", "CatalogError", "load_catalog", "load_measurements"]
