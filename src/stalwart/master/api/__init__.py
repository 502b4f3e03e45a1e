"""The REST API: thin routers (HTTP only), one module per resource, wire models in ``models``."""
