# python/vramscope/postmortem/__init__.py -- the OOM post-mortem: evidence, advice, report files
"""What happens at a CUDA out-of-memory error: the evidence (the agent's snapshot, the step
history, the providers' fields), the ranked advice and the report files. Imports every room
below it; nothing below imports it (they reach it through the session)."""
