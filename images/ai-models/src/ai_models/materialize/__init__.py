"""`ai-models materialize`: the artifacts of one workload from the serving API onto its shared claim."""
