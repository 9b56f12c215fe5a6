"""The controller process: one leader (Lease-elected) runs the reconcilers and passes; every replica serves
the admission webhook; followers wait for the Lease."""
