"""The scenarios: each module has ``async def run(ctx) -> Section``."""
