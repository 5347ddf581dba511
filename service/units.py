"""Unit conversions shared by the service's answers (one owner for each)."""

MS_PER_S = 1e3
S_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6
