"""The publication worker, `ai-models publish`: streams a model's files from its source into the
object store in constant memory, verifies them, writes the manifest last, reports progress on
the owner's status and its outcome through the Pod's termination message (see `main`)."""
