"""Annexes: is a site's annex up, and if not, request it within the profile's guards."""
