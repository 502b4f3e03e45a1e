"""The REST API: thin routers (HTTP only), one module per resource, wire models in ``models``
(shared with the SDK) and the converters from rows to them in ``wire``."""
