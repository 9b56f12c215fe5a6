"""Published artifacts: where they live in the object store, their manifest, their digest.

Pure: no I/O. The publisher writes what these modules describe, the controller and the inventory
pass read it back, the serving API serves it.
"""
