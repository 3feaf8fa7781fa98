"""What the ranks did read: the production reader a training job iterates, its small resumable state, the ledger it
writes (what each rank consumed and trained at each step), and verification of the ledger against a recomputation.
"""
