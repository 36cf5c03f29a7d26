"""State shared by every worker and instance of one deployment, through Redis.

Every shared structure has a per-process fallback: when Redis is not configured
or not reachable, the gateway keeps serving with per-instance state.
"""
