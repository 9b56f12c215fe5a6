"""The serving API as its readers see it (the materializer onto a shared claim, the node cache onto
a node's disk): the HTTP client and the verified, resumable copy of an artifact tree."""
