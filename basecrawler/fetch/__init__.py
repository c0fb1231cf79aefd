"""Getting documents from publishers: the HTTP client and its policy and limits, the raw archive, the artifact manifest, record/replay."""
