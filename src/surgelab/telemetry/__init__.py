"""The server's view during a run: scraping Prometheus endpoints, deriving rates and
percentiles, exporting surgelab's own metrics, and turning it all into bottleneck hints."""
