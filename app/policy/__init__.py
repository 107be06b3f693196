"""Pure policy: plain data in, decisions out. No I/O, no asyncio, time is an argument."""
