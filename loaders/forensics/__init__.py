"""Facts about what runs read, computed from their ledgers and read order: the realized mixture (samples and tokens
each source gave a run, per window and per step, against the plan).
"""
