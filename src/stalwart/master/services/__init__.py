"""Business logic per resource. Services take a Session, never import FastAPI, and raise
StalwartError subclasses; routers translate HTTP only."""
