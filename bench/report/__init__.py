"""Static, self-contained reports (HTML and PDF) rendered from run records alone."""
