"""The internal lookup API: one Model or ClusterModel as the ai-inference module needs it (its
artifact, resolved profile, conditions and where to fetch it). It is apart because it is served
only on the internal TLS listener, to other modules rather than users, and tolerates a status
written by a newer controller instead of failing the lookup."""
