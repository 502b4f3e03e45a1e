"""Wire models: Determined's v1 JSON shapes (lowerCamelCase out, camel or snake case in).

The SDK validates the master's answers with these very classes (``stalwart.client.models``), so
every module here imports with the base dependencies only: pydantic classes and pure helpers, no
tables, services or FastAPI. Converters from rows to models are in ``stalwart.master.api.wire``.
"""
