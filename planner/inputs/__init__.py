"""What a user or a published anchor states: scenario, question and anchor schemas validated at
the edge, and benchmark-client presets. Imports nothing above it.
"""
