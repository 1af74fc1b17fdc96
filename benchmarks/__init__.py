"""`make bench`: the pipeline's speed on generated data (kept out of `make test`)."""
