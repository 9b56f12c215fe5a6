"""The serving API: the manifests and files of Ready artifacts, read by materialize Jobs, the
NodeCache node plugin and another cluster's `AIModels` catalog source (`listing`). It is apart
because its readers are machines that fetch gigabytes: it streams in constant memory with ranges
and conditions (`ranges`), bounds downloads per replica and per subject, and admits a second
credential, the delivery tokens of materialize Jobs (`delivery_tokens`)."""
