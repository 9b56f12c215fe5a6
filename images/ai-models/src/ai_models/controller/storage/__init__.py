"""The storage room of the controller: the ledger Secret's informer, the inventory pass that keeps
the ledger equal to the object store, the catalog sweep, the storage metrics (`runtime.StorageRuntime`
wires them). The ledger's operations themselves are a floor, `controller.accounting`, which the
Model room's steps use too."""
