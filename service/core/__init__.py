"""The compute core: pure numpy, no FastAPI or SQLAlchemy. Works on arrays built once from the catalog."""
