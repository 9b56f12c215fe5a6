"""`ai-models node-cache`: the CSI node plugin of the NodeCache delivery mode and its per-node cache."""
