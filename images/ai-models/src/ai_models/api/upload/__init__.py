"""The upload API: a user's own files become a Model or ClusterModel through one streaming PUT per
upload URL. It is apart because it is the one surface that writes to the store: everything that can
refuse the upload (token, caller, object, slot, claim, reservation) runs before the body is read,
and the body then streams in constant memory under a pace that cuts a trickle off (`uploads`)."""
