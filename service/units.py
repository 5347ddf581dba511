"""Unit conversions shared by the service and its compute core (one owner for each)."""

MS_PER_S = 1e3
S_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6
GIB_BYTES = 1024**3           # bytes in one GiB (binary unit, as engines log memory)
GB_BYTES = 1e9                # bytes in one GB (decimal unit, as datasheets state memory)
MB_BYTES = 1e6                # bytes in one MB (decimal, as the catalog's NCCL buffer sizes)
