"""Where a job can run: the site catalogue, each site's limits, rotation and placement."""
