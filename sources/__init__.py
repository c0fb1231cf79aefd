"""Source crawlers: one module per source, each with one BaseCrawler subclass (found automatically)."""
