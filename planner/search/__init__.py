"""Search over deployments: the candidate space, stage-1 scoring, stage-2 simulation, plan,
compare, the search of unknown fields, anchor validation. Imports the model and inputs.
"""
