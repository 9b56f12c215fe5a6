"""Helpers of the CSI node plugin's tests: the generated modules' codegen, Models in the emulator."""
