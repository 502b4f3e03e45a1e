"""Wire models: Determined's v1 JSON shapes (lowerCamelCase out, camel or snake case in)."""
