"""Adapters that put the mhc ops into models written by others."""
