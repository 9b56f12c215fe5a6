"""The controller process: one leader (Lease-elected) runs the kopf operator; followers wait."""
