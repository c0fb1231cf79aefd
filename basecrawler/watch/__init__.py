"""Watches (issue #33): saved searches delivered once per record version through an outbox,
by Atom feed, e-mail or webhook. model / repository (the watches table), matching (the search
of reading/search.py over what changed), outbox (claims, retries, counts), channels/, delivery
(the pass run after every crawl and translation batch)."""
