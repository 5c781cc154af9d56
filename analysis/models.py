"""Models of the analysis app."""
