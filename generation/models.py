"""Models of the generation app."""
